"""Contention measured per point on a CPU device (issue 53): the pressure-stall share, the
cores the process got and waited for, its involuntary switches, and the CPU time of
every sample beside its wall time; recorded, read back, said."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

from xbackend.backends.cpu import CpuBackend
from xbackend.measuring import contention
from xbackend.measuring.contention import Counters, between
from xbackend.measuring.timing import Sampling
from xbackend.results import PointRecord, RecordError


def test_the_fields_are_each_counter_over_the_window():
    begin = Counters(wall_s=10.0, cpu_s=3.0, stall_us=1_000_000, waited_ns=5 * 10**8, switches=7)
    end = Counters(wall_s=12.0, cpu_s=4.0, stall_us=1_800_000, waited_ns=9 * 10**8, switches=19)
    found = between(begin, end)
    assert found == {"sampled_s": 2.0, "own_cores": 0.5, "stall_share": 0.4,
                     "waited_cores": 0.2, "involuntary_switches": 12.0}  # fmt: skip


def test_a_counter_not_read_is_left_out():
    begin = Counters(wall_s=1.0, cpu_s=1.0, stall_us=None, waited_ns=None, switches=None)
    end = Counters(wall_s=2.0, cpu_s=1.25, stall_us=None, waited_ns=None, switches=None)
    assert between(begin, end) == {"sampled_s": 1.0, "own_cores": 0.25}


def _measured(seed: int) -> tuple[list[float], list[float], dict[str, float]]:
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((48, 40)).astype(np.float32)
    B = rng.standard_normal((40, 56)).astype(np.float32)
    backend = CpuBackend()
    m = backend.measure(A, B, "naive", sampling=Sampling(min_samples=5, max_samples=8))
    np.testing.assert_allclose(m.result, A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)
    assert m.host_load is not None
    return m.kernel_s, m.cpu_s, m.host_load


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_cpu_point_records_its_contention_and_a_cpu_time_per_sample():
    kernel_s, cpu_s, load = _measured(53)
    assert len(cpu_s) == len(kernel_s) >= 5
    assert all(value > 0 for value in cpu_s)  # the serial loop used the CPU it ran on
    assert {"sampled_s", "own_cores", "waited_cores", "involuntary_switches"} <= set(load)
    assert load["own_cores"] > 0 and load["waited_cores"] >= 0
    if os.path.exists(contention.PRESSURE_FILE):
        assert 0 <= load["stall_share"] <= 1


def _point(**fields: object) -> dict[str, object]:
    base = {"type": "point", "run_id": "r", "backend": "cpu", "label": "cpu", "device": "x",
            "variant": "naive", "tile": None, "dtype": "float32", "M": 4, "K": 4, "N": 4,
            "flops": 128, "status": "ok", "kernel_s": {"median": 1e-3, "q1": 1e-3,
            "q3": 1e-3, "min": 1e-3}, "end_to_end_s": {"median": 1e-3, "q1": 1e-3,
            "q3": 1e-3, "min": 1e-3}, "kernel_samples_s": [1e-3, 1.1e-3]}  # fmt: skip
    return {**base, **fields}


def test_cpu_samples_are_kept_read_back_and_absent_in_files_from_before():
    point = PointRecord.from_dict(_point(cpu_samples_s=[9e-4, 0.0]))
    assert point.cpu_samples_s == [9e-4, 0.0]
    assert PointRecord.from_dict(json.loads(json.dumps(point.to_dict()))) == point
    old = PointRecord.from_dict(_point())
    assert old.cpu_samples_s == [] and "cpu_samples_s" not in old.to_dict()


def test_a_cpu_time_below_zero_names_its_field():
    with pytest.raises(RecordError, match="cpu_samples_s"):
        PointRecord.from_dict(_point(cpu_samples_s=[-1e-3]))


def test_contention_that_differs_is_said_with_its_figures():
    a = {"stall_share": 0.02, "own_cores": 0.98, "waited_cores": 0.01}
    b = {"stall_share": 0.41, "own_cores": 0.55, "waited_cores": 0.44}
    said = contention.differs(a, b, contention.QUIET_STALL)
    assert said == (
        "some task waited for a core 2% of the time in A, 41% in B (/proc/pressure/cpu); "
        "xbackend got 0.98 cores in A, 0.55 in B; its threads waited for 0.01 cores in A, "
        "0.44 in B"
    )
    assert contention.differs(a, dict(a), contention.QUIET_STALL) is None


def test_both_runs_contended_alike_is_still_said():
    a = {"stall_share": 0.5, "own_cores": 1.0}
    said = contention.differs(a, {"stall_share": 0.52, "own_cores": 1.02}, 0.1)
    assert said == "the host was contended beyond the A/A floors' 10% stall: 50% in A, 52% in B"


def test_a_run_measured_contended_says_so_in_one_sentence():
    loads = [{"stall_share": 0.0}, {"stall_share": 0.35, "waited_cores": 0.2}, None]
    said = contention.sentence(loads)
    assert said is not None and said.startswith(
        "contended: some task waited for a core over 10% of the time at 1 of 2 points"
    )
    assert contention.sentence([{"stall_share": 0.01}]) is None


@pytest.mark.slow
def test_a_vendor_ratio_from_contended_points_says_so(tmp_path):
    from test_findings import _all, _report_findings

    from xbackend.cli.summary import summary_table

    points = _all(seed=53)
    for point in points:
        if point["label"] == "cpu":
            point["host_load"] = {"stall_share": 0.62, "own_cores": 0.55, "blas_threads": 1}
    table = summary_table([PointRecord.from_dict(p) for p in points])
    assert (
        "  cpu mm vendor float32: the BLAS on 1 thread, as many as the host left it at each "
        "point (other jobs' cores taken away)"
    ) in table.splitlines()
    found = _report_findings(tmp_path, points)
    (vendor,) = [s for s in found if s.startswith("On cpu") and "vendor's library" in s]
    assert vendor.endswith(
        "Measured on a contended host (vendor: stall 62%, got 0.55 cores; tiled T=64: stall "
        "62%, got 0.55 cores): the ratio moves with the host's load, not with the kernels alone."
    )


def test_the_summary_says_why_an_end_to_end_time_reads_under_the_kernel_time():
    from xbackend.cli.summary import summary_table
    from xbackend.measuring.timing import Stats

    rng = np.random.default_rng(5307)
    quick = [float(s) for s in 2e-4 * (1 + 0.01 * rng.standard_normal(9))]
    slow = [3 * s for s in quick]
    batched = PointRecord.from_dict(_point(
        launches=12, kernel_s=Stats.of(slow).to_dict(), kernel_samples_s=slow,
        end_to_end_s=Stats.of(quick).to_dict(), end_to_end_samples_s=quick, variant="vendor",
    ))  # fmt: skip
    note = (
        "end-to-end under the kernel time (cpu mm vendor): there the kernel time is the mean "
        "of a batch of launches run after the product the end-to-end time is of, and the "
        "batch ran slower per launch"
    )
    assert note in summary_table([batched]).splitlines()
    single = PointRecord.from_dict(_point(kernel_samples_s=quick))
    assert "end-to-end under" not in summary_table([single])


def test_the_cores_xbackend_got_count_only_where_some_task_waited():
    idle_a = {"stall_share": 0.0, "own_cores": 1.46, "waited_cores": 0.0}
    idle_b = {"stall_share": 0.086, "own_cores": 1.04, "waited_cores": 0.036}  # idle's most
    assert not contention.waited(idle_a, idle_b)
    assert contention.differs(idle_a, idle_b, contention.QUIET_STALL) is None
    unread = {"stall_share": None, "waited_cores": None}  # nothing tells that none waited
    for waiting in ({"waited_cores": 0.05}, {"stall_share": 0.1}, unread):
        b = {**idle_b, **waiting}
        assert contention.waited(idle_a, b)
        said = contention.differs(idle_a, b, 0.5)
        assert said is not None and "xbackend got 1.46 cores in A, 1.04 in B" in said
