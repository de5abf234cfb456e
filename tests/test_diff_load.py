"""diff and the host's load (issue 37): no FASTER or SLOWER on a CPU device between runs
whose host's load differed, and every UNCERTAIN says why."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pytest

from xbackend.analysis import diff, floors
from xbackend.measuring.timing import Stats
from xbackend.results import PointRecord, RunHeader
from xbackend.results.writing import ResultsWriter

SEED = 3711
CPU = "AMD EPYC"


def _point(run: str, M: int, seconds: float, others: float | None, rng, **changes) -> PointRecord:
    samples = [float(s) for s in seconds * (1 + 0.003 * rng.standard_normal(20))]
    point = PointRecord(
        run_id=run, backend="cpu", label="cpu", device=CPU, variant="naive", tile=None,
        dtype="float32", M=M, K=M, N=M, flops=2 * M**3, status="ok", clock="host",
        kernel_s=Stats.of(samples).to_dict(), end_to_end_s=Stats.of(samples).to_dict(),
        kernel_samples_s=samples, end_to_end_samples_s=samples,
        host_load=None if others is None else {"others_cores": others, "window_s": 1.0},
    )  # fmt: skip
    return dataclasses.replace(point, **changes)


def _pair(a_load, b_load, slower, **changes):
    rng = np.random.default_rng(SEED)
    a = _point("a", 256, 2e-2, a_load, rng, **changes)
    b = _point("b", 256, 2e-2 * slower, b_load, rng, **changes)
    return a, b


@pytest.mark.parametrize("slower", [1.9, 0.5])
@pytest.mark.parametrize("loads", [(0.0, 1.0), (1.9, 0.1), (0.2, 0.8)])
def test_a_cpu_devices_change_under_another_load_is_uncertain_with_the_loads(slower, loads):
    a, b = _pair(loads[0], loads[1], slower)
    (found,) = diff.compare_points([a], [b], cpu_devices=[CPU], floors=floors.Floors())
    assert found.verdict == diff.UNCERTAIN
    assert "the host's load differs" in found.note
    assert f"{loads[0]:.2g} cores in A, {loads[1]:.2g} in B" in found.note


@pytest.mark.parametrize("slower,verdict", [(1.9, diff.SLOWER), (0.5, diff.FASTER)])
def test_under_the_same_load_or_off_the_cpu_a_change_is_claimed(slower, verdict):
    same = _pair(0.1, 0.3, slower)
    (found,) = diff.compare_points(*([p] for p in same), cpu_devices=[CPU])
    assert found.verdict == verdict
    # A GPU's kernel time does not move with the host's load: its verdict stands.
    gpu = _pair(0.0, 1.5, slower, device="NVIDIA H200", clock="globaltimer")
    (found,) = diff.compare_points(*([p] for p in gpu), cpu_devices=[CPU])
    assert found.verdict == verdict
    # The CPU backend's clock is the host's: a CPU device whatever the headers say.
    host = _pair(0.0, 1.5, slower, backend="cpu", label="cpu", clock="host")
    (found,) = diff.compare_points(*([p] for p in host))
    assert found.verdict == diff.UNCERTAIN


def test_files_without_loads_keep_their_verdicts():
    a, b = _pair(None, 1.0, 1.9)
    (found,) = diff.compare_points([a], [b], cpu_devices=[CPU])
    assert found.verdict == diff.SLOWER


@pytest.mark.parametrize(
    "interval,floor,reason",
    [((1.03, 0.99, 1.08), 0.0, "the interval reaches past 1 ± 5%"),
     ((1.2, 1.15, 1.25), 0.3, "a change within the A/A floor ±30%"),
     ((0.8, 0.78, 0.82), 0.3, "a change within the A/A floor ±30%"),
     ((1.0, float("nan"), 1.1), 0.0, "no finite interval")],
)  # fmt: skip
def test_every_uncertain_says_why(interval, floor, reason):
    found = diff.Interval(*interval)
    assert diff.verdict(found, 0.05, floor) == diff.UNCERTAIN
    assert diff.uncertain_reason(found, 0.05, floor) == reason


def _write(folder, points, kind):
    header = RunHeader(points[0].run_id, devices={"opencl": {"name": CPU, "kind": kind}})
    with ResultsWriter(folder, header) as writer:
        for point in points:
            writer.append(point)
    return folder


@pytest.mark.slow
def test_diff_fail_on_slower_passes_a_loaded_cpu_pair_and_names_the_load(tmp_path):
    """The issue's pair: OpenCL on a CPU, 22.6 ms then 42.9 ms with a core kept busy: no
    SLOWER, the load named; the same pair on a device the headers call a GPU fails."""
    rng = np.random.default_rng(SEED)
    opencl = {"backend": "opencl", "label": "opencl", "tile": 16, "clock": "opencl-profiling"}
    a_points = [_point("a", M, 2.26e-2 * M / 256, 0.0, rng, **opencl) for M in (128, 256)]
    b_points = [_point("b", M, 4.29e-2 * M / 256, 1.0, rng, **opencl) for M in (128, 256)]
    for kind, status in (("cpu", 0), ("gpu", 1)):
        a = _write(tmp_path / f"a-{kind}", a_points, kind)
        b = _write(tmp_path / f"b-{kind}", b_points, kind)
        done = subprocess.run(
            [sys.executable, "-m", "xbackend", "diff", str(a), str(b), "--fail-on", "slower",
             "--no-plots", "--out", str(tmp_path / f"d-{kind}")],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == status, done.stdout + done.stderr
        if kind == "cpu":
            assert "2 UNCERTAIN" in done.stdout and "host's load differs" in done.stdout


def test_a_floor_says_where_it_was_measured():
    rng = np.random.default_rng(SEED)
    a = _point("a", 256, 2e-2, None, rng, device="H100", clock="globaltimer")
    b = dataclasses.replace(a, run_id="b")
    kind = floors.kind_of(a)
    assert kind is not None
    shipped = floors.Floors({kind: 0.2}, 4, "H100 machine, 4 runs")
    (found,) = diff.compare_points([a], [b], floors=shipped)
    assert found.floor == pytest.approx(0.3)
    assert found.floor_from == "H100: globaltimer, 10-100 ms, from H100 machine, 4 runs"


def _probed(point: PointRecord, before_us: float, after_us: float) -> PointRecord:
    load = {**(point.host_load or {}), "probe_us": before_us, "probe_after_us": after_us}
    return dataclasses.replace(point, host_load=load)


@pytest.mark.parametrize(
    "a_probe,b_probe,verdict",
    [((500, 510), (1050, 990), diff.UNCERTAIN),  # the host ran B 2x slower
     ((500, 500), (560, 560), diff.UNCERTAIN),  # 12%: past the probe's own spread
     ((500, 505), (510, 500), diff.SLOWER)],  # the same host speed: the change is the kernel's
)  # fmt: skip
def test_a_host_that_ran_at_another_speed_gives_no_verdict_on_a_cpu(a_probe, b_probe, verdict):
    """Issue 37, on an H200's 16-core host: CPU lines 2x slower in a second run with other
    processes at 0.0 cores; the fixed probe each point runs says what the counters cannot."""
    a, b = _pair(0.0, 0.0, 1.9)
    a, b = _probed(a, *a_probe), _probed(b, *b_probe)
    (found,) = diff.compare_points([a], [b], cpu_devices=[CPU])
    assert found.verdict == verdict
    if verdict == diff.UNCERTAIN:
        assert "the host ran at another speed: a fixed probe took" in found.note


def test_the_probe_is_taken_on_a_cpu_device_only():
    from xbackend.measuring.host_load import HostWatch

    for probe in (False, True):
        watch = HostWatch(probe=probe)
        watch.start()
        found = watch.finish()
        assert ("probe_us" in found and "probe_after_us" in found) == probe
        if probe:
            assert 0 < found["probe_us"] < 1e6
