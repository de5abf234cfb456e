"""diff judged on what moved (issue 53): on a CPU device no FASTER or SLOWER where the two
runs' contention differs, or either was contended beyond what the A/A floors were measured
under, unless the CPU times say the same; every such UNCERTAIN gives its figures."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from xbackend.analysis import diff, floors
from xbackend.measuring.timing import Stats
from xbackend.results import PointRecord

SEED = 5301
CPU = "Intel(R) Xeon(R) Processor"
QUIET = {"stall_share": 0.01, "own_cores": 0.99, "waited_cores": 0.0}
CROWDED = {"stall_share": 0.62, "own_cores": 0.55, "waited_cores": 0.41}


def _point(run: str, wall_s: float, cpu_s: float, load: dict[str, float] | None, rng):
    wall = [float(s) for s in wall_s * (1 + 0.004 * rng.standard_normal(24))]
    cpu = [float(s) for s in cpu_s * (1 + 0.004 * rng.standard_normal(24))]
    return PointRecord(
        run_id=run, backend="cpu", label="cpu", device=CPU, variant="naive", tile=None,
        dtype="float32", M=96, K=84, N=96, flops=2 * 96 * 84 * 96, status="ok", clock="host",
        kernel_s=Stats.of(wall).to_dict(), end_to_end_s=Stats.of(wall).to_dict(),
        kernel_samples_s=wall, end_to_end_samples_s=wall, cpu_samples_s=cpu, host_load=load,
    )  # fmt: skip


def _compared(a_load, b_load, wall_ratio, cpu_ratio, floor_file=None, time="kernel", cpu_s=8e-3):
    rng = np.random.default_rng(SEED)
    a = _point("a", 8e-3, cpu_s, a_load, rng)
    b = _point("b", 8e-3 * wall_ratio, cpu_s * cpu_ratio, b_load, rng)
    (found,) = diff.compare_points([a], [b], floors=floor_file or floors.Floors(), time=time)
    return found


@pytest.mark.parametrize("loads", [(QUIET, CROWDED), (CROWDED, QUIET)])
def test_a_wall_clock_change_the_cpu_time_does_not_show_is_uncertain_with_its_figures(loads):
    crowded_b = loads[1] is CROWDED  # the crowded run's wall time the longer, its CPU time not
    found = _compared(loads[0], loads[1], wall_ratio=1.7 if crowded_b else 0.6, cpu_ratio=1.0,
                      cpu_s=8e-3 if crowded_b else 4.8e-3)  # fmt: skip
    assert found.verdict == diff.UNCERTAIN and found.host_differed
    a, b = loads
    assert (
        f"some task waited for a core {a['stall_share']:.0%} of the time in A, "
        f"{b['stall_share']:.0%} in B (/proc/pressure/cpu)"
    ) in found.note
    assert f"xbackend got {a['own_cores']:.2f} cores in A, {b['own_cores']:.2f} in B" in found.note
    assert "the CPU time does not say" in found.note and "B/A 1" in found.note


def test_a_change_the_cpu_time_shows_too_stands_under_another_contention():
    found = _compared(QUIET, CROWDED, wall_ratio=1.8, cpu_ratio=1.5)
    assert found.verdict == diff.SLOWER and not found.host_differed
    assert "the CPU time says SLOWER too: B/A 1.5" in found.note


def test_both_runs_contended_alike_beyond_the_floors_is_uncertain():
    busy = {"stall_share": 0.5, "own_cores": 0.7}
    found = _compared(busy, dict(busy), wall_ratio=1.6, cpu_ratio=1.0)
    assert found.verdict == diff.UNCERTAIN
    assert found.note.startswith(
        "the host was contended beyond the A/A floors' 10% stall: 50% in A, 50% in B"
    )


def test_floors_measured_under_contention_allow_it():
    busy = {"stall_share": 0.5, "own_cores": 0.7}
    rng = np.random.default_rng(SEED)
    a, b = _point("a", 8e-3, 8e-3, busy, rng), _point("b", 8e-3, 8e-3, busy, rng)
    measured = floors.measured([(a, b)], "one A/A pair under load")
    assert measured.stall == 0.5 and measured.stall_limit == 0.5
    found = _compared(busy, dict(busy), wall_ratio=1.6, cpu_ratio=1.0, floor_file=measured)
    assert found.verdict == diff.SLOWER


def test_the_floors_stall_is_written_and_read_back(tmp_path):
    path = tmp_path / "floors.json"
    floors.save(floors.Floors({"x | host 1e-3": 0.1}, 2, "two pairs", stall=0.07), path)
    assert floors.load(path).stall == 0.07
    floors.save(floors.Floors({"x | host 1e-3": 0.1}, 2, "two pairs"), path)
    assert floors.load(path).stall is None and floors.load(path).stall_limit == 0.1
    merged = floors.Floors({}, 1, "a", stall=0.3).merged(floors.Floors({}, 1, "b", stall=0.6))
    assert merged.stall == 0.6 and floors.Floors().merged(floors.Floors()).stall is None
    path.write_text('{"floors": {}, "stall": 7}')
    with pytest.raises(ValueError, match="stall 7: expected a share from 0 to 1"):
        floors.load(path)


def test_a_run_without_cpu_times_cannot_keep_a_contended_change():
    rng = np.random.default_rng(SEED)
    a = _point("a", 8e-3, 8e-3, QUIET, rng)
    b = dataclasses.replace(_point("b", 1.6e-2, 1.6e-2, CROWDED, rng), cpu_samples_s=[])
    (found,) = diff.compare_points([a], [b])
    assert found.verdict == diff.UNCERTAIN
    assert found.note.endswith("no CPU time recorded to tell the kernel's part")


def test_end_to_end_times_have_no_cpu_time_to_keep_a_contended_change():
    found = _compared(QUIET, CROWDED, wall_ratio=1.8, cpu_ratio=1.8, time="end-to-end")
    assert found.verdict == diff.UNCERTAIN
    assert found.note.endswith("no CPU time of the end-to-end window")


def test_quiet_runs_keep_their_verdict_and_a_gpu_is_not_asked():
    assert _compared(QUIET, dict(QUIET), wall_ratio=1.6, cpu_ratio=1.0).verdict == diff.SLOWER
    rng = np.random.default_rng(SEED)
    gpu = [dataclasses.replace(_point(r, s, s, load, rng), device="NVIDIA H200",
                               clock="globaltimer", cpu_samples_s=[])
           for r, s, load in (("a", 8e-3, QUIET), ("b", 1.6e-2, CROWDED))]  # fmt: skip
    (found,) = diff.compare_points([gpu[0]], [gpu[1]])
    assert found.verdict == diff.SLOWER


def test_the_summary_line_counts_what_contention_took_back():
    from xbackend.cli.diff import summary_line

    found = _compared(QUIET, CROWDED, wall_ratio=1.7, cpu_ratio=1.0)
    assert summary_line([found], 0.05).endswith(
        "1 UNCERTAIN on a CPU device because the kernel ran on several threads at once, or the "
        "host's load, speed or contention differed between the runs, or was past the A/A "
        "floors', and the CPU time did not say the same (the note of each gives the figures)"
    )


@pytest.mark.parametrize(
    "changes", [{"clock": "opencl-profiling", "backend": "opencl", "label": "opencl"},
                {"variant": "vendor", "threads": 2.0}],
)  # fmt: skip
def test_the_cpu_time_of_threads_that_wait_for_each_other_keeps_no_change(changes):
    """An OpenCL runtime's workers and a BLAS's threads spin: their CPU time moved 1.43× for
    an unchanged kernel under contention, so it keeps no verdict."""
    rng = np.random.default_rng(SEED)
    threads = changes.pop("threads", None)
    points = []
    for run, seconds, load in (("a", 8e-3, QUIET), ("b", 1.6e-2, CROWDED)):
        load = {**load, **({"blas_threads": threads} if threads else {})}
        points.append(dataclasses.replace(_point(run, seconds, seconds, load, rng), **changes))
    (found,) = diff.compare_points([points[0]], [points[1]], cpu_devices=[CPU])
    assert found.verdict == diff.UNCERTAIN
    assert found.note.endswith("the CPU time is not one thread's work on the kernel alone")


def test_a_cpu_time_past_the_wall_time_or_on_a_host_of_another_speed_keeps_no_change():
    """A 1.27 µs BLAS call's CPU time was 2.2 µs with the harness's loop around its batch,
    and read 2.51× in the next run, whose host ran a fixed probe 1.34× slower."""
    rng = np.random.default_rng(SEED)
    a = _point("a", 1.3e-6, 2.2e-6, {**QUIET, "blas_threads": 1.0}, rng)
    b = _point("b", 6.4e-6, 5.5e-6, {**CROWDED, "blas_threads": 1.0}, rng)
    (found,) = diff.compare_points([a], [b])
    assert found.verdict == diff.UNCERTAIN
    assert found.note.endswith("the CPU time is not one thread's work on the kernel alone")
    probed = [dataclasses.replace(p, host_load={**(p.host_load or {}), "probe_us": probe,
                                                "probe_after_us": probe})
              for p, probe in ((_point("a", 8e-3, 8e-3, QUIET, rng), 400.0),
                               (_point("b", 1.6e-2, 1.6e-2, CROWDED, rng), 536.0))]  # fmt: skip
    (found,) = diff.compare_points([probed[0]], [probed[1]])
    assert found.verdict == diff.UNCERTAIN
    assert found.note.endswith("the host's speed moves the CPU time too")


# The idle 2-core machine's planted pair (docs/diff.md, 2026-11-28 09:47): the serial naive
# kernel got 1.46 cores in A and 1.04 in B at 128×112 (its harness's and idle threads), no
# task waiting for a core in either run.
IDLE_A = {"stall_share": 0.0, "own_cores": 1.46, "waited_cores": 0.0}
IDLE_B = {"stall_share": 0.001, "own_cores": 1.04, "waited_cores": 0.0}
# A loaded run's point (another job holding one core): 5.8% stall, its threads waiting for
# 0.096 cores; and two runs both past the floors' stall.
WAITING = {"stall_share": 0.058, "own_cores": 0.99, "waited_cores": 0.096}
BUSY_A = {"stall_share": 0.9, "own_cores": 0.31, "waited_cores": 0.7}
BUSY_B = {"stall_share": 0.92, "own_cores": 0.62, "waited_cores": 0.75}


def test_an_idle_pair_differing_only_in_the_cores_xbackend_got_keeps_its_slower():
    """No task waited for a core in either run: nothing took cores from xbackend, so the
    cores it got say nothing of the host (before: UNCERTAIN, 5 of the 16 planted points)."""
    found = _compared(IDLE_A, IDLE_B, wall_ratio=1.5, cpu_ratio=1.0)
    assert found.verdict == diff.SLOWER and not found.host_differed and found.note == ""


@pytest.mark.parametrize("loads", [(WAITING, IDLE_A), (BUSY_A, BUSY_B)])
def test_a_loaded_pair_differing_in_the_cores_xbackend_got_stays_uncertain(loads):
    a, b = loads
    found = _compared(a, b, wall_ratio=1.5, cpu_ratio=1.0)
    assert found.verdict == diff.UNCERTAIN and found.host_differed
    assert f"xbackend got {a['own_cores']:.2f} cores in A, {b['own_cores']:.2f} in B" in found.note


# Two idle runs of an unchanged two-thread BLAS (2026-11-28 11:45, the 2-core machine): no
# task waited, no other process took a core, and B read 1.59x at 112x98 (up to 3.17x).
IDLE_BLAS_A = {"stall_share": 0.011, "own_cores": 2.0, "waited_cores": 0.002, "blas_threads": 2}
IDLE_BLAS_B = {"stall_share": 0.0, "own_cores": 2.01, "waited_cores": 0.001, "blas_threads": 2}


def test_a_kernel_on_several_threads_has_no_verdict_on_an_idle_cpu_host():
    found = _compared(IDLE_BLAS_A, IDLE_BLAS_B, wall_ratio=1.59, cpu_ratio=1.59)
    assert found.verdict == diff.UNCERTAIN and found.host_differed
    assert "its kernel ran on 2 threads at once (the BLAS's)" in found.note
    assert "the CPU time is not one thread's work on the kernel alone" in found.note
    serial = {key: value for key, value in IDLE_BLAS_A.items() if key != "blas_threads"}
    kept = _compared(serial, serial, wall_ratio=1.59, cpu_ratio=1.59)
    assert kept.verdict == diff.SLOWER and kept.note == ""  # one thread: the kernel's change


def test_an_opencl_runtime_on_a_cpu_has_no_verdict_from_its_wall_time():
    rng = np.random.default_rng(SEED)
    a, b = (
        dataclasses.replace(_point(run, 8e-3 * ratio, 8e-3, QUIET, rng), clock="opencl-profiling")
        for run, ratio in (("a", 1.0), ("b", 1.5))
    )
    (found,) = diff.compare_points([a], [b], floors=floors.Floors(), cpu_devices=[CPU])
    assert found.verdict == diff.UNCERTAIN
    assert "its kernel ran on the runtime's threads at once (opencl-profiling)" in found.note
