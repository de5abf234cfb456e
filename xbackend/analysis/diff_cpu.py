"""What ``diff`` asks of a FASTER or SLOWER on a CPU device (the CPU backend, OpenCL on a
CPU) before it claims it: that the host did not make it (issue 53).

A CPU's wall-clock time moves with what the host takes from the measured process. Two
identical default ``compare`` runs on a 2-core machine with other jobs beside gave 33
FASTER: other processes took 1.45-1.69 cores in one and 1.29-1.45 in the other, which left
xbackend 0.31-0.55 cores against 0.55-0.71. So a change is taken back (UNCERTAIN) where
the two points' hosts differed:

- other processes took ``host_load.BUSY_CORES`` more in one (``others_cores``), or the host
  ran a fixed probe ``host_load.UNSTEADY`` slower or faster (``probe_us``);
- either point's kernel ran on several threads at once (:func:`threads_reason`: its wall
  time moves with the host's share of every core, unseen);
- their contention differs, or either was contended beyond what the A/A floors were
  measured under (``contention.differs``: the pressure-stall share, the cores xbackend got
  and its threads waited for);

unless the CPU time of the samples (``cpu_samples_s``), which other jobs move far less,
gives the same verdict where it is one thread's work (:func:`one_thread`): then the change
is the kernel's, and the note says both.
Every such note gives the figures that made it so.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from xbackend.measuring import contention
from xbackend.measuring.host_load import BUSY_CORES, probe_ratio, speed_changed
from xbackend.measuring.timing import unmarked
from xbackend.results import PointRecord


def load_reason(a: PointRecord, b: PointRecord) -> str | None:
    """Where two points of a CPU device were measured under host loads that differ by
    ``BUSY_CORES`` or more, or on a host whose speed (its probe: ``host_load.probe_s``)
    differed by ``host_load.UNSTEADY`` or more, that in words; else None (or where either
    has neither)."""
    loads = [(p.host_load or {}).get("others_cores") for p in (a, b)]
    if None not in loads and abs(float(loads[0] or 0) - float(loads[1] or 0)) >= BUSY_CORES:
        return (
            f"the host's load differs: other processes took {loads[0]:.2g} cores in A, "
            f"{loads[1]:.2g} in B (a CPU's time moves with it)"
        )
    ratio = probe_ratio(a.host_load, b.host_load)
    if ratio is not None and speed_changed(ratio):
        return (
            f"the host ran at another speed: a fixed probe took {ratio:.2f}× as long in B "
            "as in A (a CPU's time moves with it)"
        )
    return None


def host_reason(a: PointRecord, b: PointRecord, stall_limit: float) -> str | None:
    """Everything about two points' hosts that makes a wall-clock change between them
    unsafe to claim (:func:`load_reason`, ``contention.differs`` against ``stall_limit``),
    in words with the figures; None where nothing is."""
    said = (
        threads_reason(a, b),
        load_reason(a, b),
        contention.differs(a.host_load, b.host_load, stall_limit),
    )
    return "; ".join(text for text in said if text) or None


def threads_reason(a: PointRecord, b: PointRecord) -> str | None:
    """Where either point's kernel ran on several threads at once (the BLAS on more than
    one, an OpenCL runtime's workers: a clock other than the host's), that in words: its
    wall time moves with the host's share of every core at once, which no counter here
    sees. Idle (no task waiting, no other process's core), an unchanged BLAS on the 2-core
    machine's two threads read 1.04-3.17× slower in the second of two runs (2026-11-28
    11:45, docs/diff.md); and the CPU time of threads that wait for each other is no
    witness (:func:`one_thread`)."""
    for point in (a, b):
        threads = float((point.host_load or {}).get("blas_threads", 1) or 1)
        if threads > 1:
            return f"its kernel ran on {threads:g} threads at once (the BLAS's)"
        if point.clock != "host":
            return f"its kernel ran on the runtime's threads at once ({point.clock})"
    return None


def cpu_samples(point: PointRecord) -> list[float]:
    """The CPU times of a point's kept samples (those its statistics are made of); none
    where it recorded none (files from before, a GPU) or they do not go with its samples."""
    cpu = point.cpu_samples_s
    if len(cpu) != len(point.kernel_samples_s):
        return []
    marks = point.sample_marks if len(point.sample_marks) == len(cpu) else []
    return unmarked(cpu, marks) if not (marks and all(marks)) else list(cpu)


# The most a point's CPU time may exceed its wall time for it to be the kernel's own work:
# past it, the harness's loop around a batch's short calls (which the kernel time leaves
# out) or another thread is in it, and those move with the host's speed.
OWN_WORK = 1.25


def one_thread(point: PointRecord) -> bool:
    """Whether a point's CPU time is one thread's work on the kernel: the CPU backend's (its
    clock is the host's) but for a BLAS on more than one thread, and at most ``OWN_WORK``
    times its wall time. An OpenCL runtime's workers, and a BLAS's threads, spin while
    they wait for each other, longer the more the host holds them up: under contention the
    CPU time of an unchanged OpenCL naive kernel moved 1.43× [1.35-1.48] between two runs;
    and a 1.27 µs BLAS call's CPU time, 2.2 µs with the harness's loop around it, read 2.51×
    in the next run on a host that ran a fixed probe 1.34× slower (docs/diff.md)."""
    threads = (point.host_load or {}).get("blas_threads", 1)
    if point.clock != "host" or float(threads) > 1:
        return False
    cpu, wall = cpu_samples(point), point.kept_kernel_samples_s
    return bool(cpu and wall) and statistics.median(cpu) <= OWN_WORK * statistics.median(wall)


def judged(
    found: str,
    a: PointRecord,
    b: PointRecord,
    reason: str,
    cpu_verdict: Callable[[list[float], list[float]], tuple[str, str]],
) -> tuple[bool, str]:
    """Whether a wall-clock ``found`` (FASTER, SLOWER) stands though the hosts differed
    (``reason``): where the CPU times' verdict (``cpu_verdict``: the verdict and its
    interval in words) is the same; and the note that says why, with the figures."""
    ratio = probe_ratio(a.host_load, b.host_load)
    if ratio is not None and speed_changed(ratio):
        return False, f"{reason}; the host's speed moves the CPU time too"
    a_cpu, b_cpu = cpu_samples(a), cpu_samples(b)
    if min(len(a_cpu), len(b_cpu)) < 2:
        return False, f"{reason}; no CPU time recorded to tell the kernel's part"
    if not (one_thread(a) and one_thread(b)):
        return False, f"{reason}; the CPU time is not one thread's work on the kernel alone"
    cpu_found, interval = cpu_verdict(a_cpu, b_cpu)
    if cpu_found == found:
        return True, f"{reason}; the CPU time says {found} too: B/A {interval}"
    return False, f"{reason}; the CPU time does not say {found}: B/A {interval}"
