"""The host's load in every record (issue 37): what other processes took while a point was
measured, said by the summary and the report, and read back."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from xbackend.measuring import host_load
from xbackend.measuring.host_load import HostWatch, Reading, between


def test_others_cores_are_the_busy_time_less_this_process_over_the_window():
    begin = Reading(wall_s=10.0, busy_s=100.0, own_s=5.0, throttles=3)
    end = Reading(wall_s=11.0, busy_s=102.0, own_s=6.5, throttles=5)
    found = between(begin, end)
    assert found["others_cores"] == 0.5  # 2 s busy, 1.5 of them this process's, in 1 s
    assert found["window_s"] == 1.0 and found["throttle_events"] == 2


def test_a_window_too_short_for_the_counters_claims_no_share():
    begin = Reading(wall_s=10.0, busy_s=100.0, own_s=5.0, throttles=None)
    end = Reading(wall_s=10.02, busy_s=100.01, own_s=5.0, throttles=None)
    found = between(begin, end)
    assert "others_cores" not in found and "throttle_events" not in found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/stat")
def test_a_busy_process_beside_is_seen():
    """Another process spinning for the whole window takes about a core; this one sleeps."""
    spinner = subprocess.Popen(
        [sys.executable, "-c", "import time\nend = time.time() + 5\nwhile time.time() < end: pass"]
    )
    try:
        time.sleep(0.3)  # it has started
        watch = HostWatch()
        watch.start()
        time.sleep(0.8)
        found = watch.finish()
    finally:
        spinner.kill()
        spinner.wait()
    assert found["others_cores"] >= 0.5, found
    assert host_load.busy(found)


def test_a_short_point_reaches_back_to_an_earlier_reading():
    first = HostWatch()
    first.start()
    time.sleep(host_load.MIN_WINDOW_S + 0.05)
    first.finish()
    short = HostWatch()
    short.start()
    found = short.finish()
    assert found["window_s"] >= host_load.MIN_WINDOW_S


@pytest.mark.parametrize(
    "loads,expected",
    [([{"others_cores": 0.0}, {"others_cores": 0.2}, None], None),
     ([{"others_cores": 1.0}, {"others_cores": 0.1}, {"window_s": 0.01}],
      "during 1 of 2 measured points (up to 1 cores)"),
     ([{"others_cores": 0.6}, {"others_cores": 1.75}], "during 2 of 2 measured points (up to 1.8")],
)  # fmt: skip
def test_the_busy_sentence(loads, expected):
    sentence = host_load.busy_sentence(loads)
    if expected is None:
        assert sentence is None
    else:
        assert sentence is not None
        assert expected in sentence


@pytest.mark.slow
def test_the_summary_and_the_findings_say_the_host_was_busy(tmp_path):
    from test_findings import _all, _report_findings

    from xbackend.cli.summary import summary_table
    from xbackend.results import PointRecord

    points = _all(seed=7)
    for point in points[:5]:
        point["host_load"] = {"others_cores": 1.2, "window_s": 0.8, "stall_share": 0.4}
    table = summary_table([PointRecord.from_dict(p) for p in points])
    assert "the host was busy: other processes took half a core or more during 5 of 5" in table
    contended = "contended: some task waited for a core over 10% of the time at 5 of 5 points"
    assert contended in table  # issue 53: the contention measured, said
    sentences = _report_findings(tmp_path, points)
    assert any(s.startswith("The host was busy: other processes took") for s in sentences)
    assert any(s.startswith("C" + contended[1:]) for s in sentences)


@pytest.mark.parametrize(
    "code,env,recorded",
    [("import numpy, xbackend.sweep.environment as m", {},
      "4 (not in force: NumPy loaded OpenBLAS before xbackend set it)"),
     ("import xbackend.sweep.environment as m, numpy", {}, "4"),
     ("import numpy, xbackend.sweep.environment as m", {"OPENBLAS_THREAD_TIMEOUT": "9"}, "9")],
)  # fmt: skip
def test_the_blas_spin_is_recorded_as_in_force_only_where_it_is(code, env, recorded):
    """Issue 38, item 23: NumPy imported before xbackend (the usual order for API users)
    loads OpenBLAS before xbackend sets OPENBLAS_THREAD_TIMEOUT: the header says so."""
    import json
    import os

    environment = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    done = subprocess.run(
        [sys.executable, "-c", f"{code}; import json; print(json.dumps(m.settings()))"],
        capture_output=True, text=True, timeout=60, env={**environment, **env},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["OPENBLAS_THREAD_TIMEOUT"] == recorded


@pytest.mark.parametrize(
    "before,after,changed", [(500, 505, False), (500, 560, True), (600, 500, True), (0, 500, False)]
)
def test_a_point_under_which_the_hosts_speed_changed(before, after, changed):
    load = {"probe_us": before, "probe_after_us": after}
    assert host_load.unsteady(load) == changed
    sentence = host_load.unsteady_sentence([load, None], probed=7)
    assert (sentence is not None) == changed
    if sentence is not None:
        assert "under 1 of the 2 noisy points" in sentence and "at 7 points probed" in sentence
