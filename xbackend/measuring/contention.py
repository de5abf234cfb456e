"""What the host took from the measured process while a point's samples ran (issue 53).

``host_load.py`` says what other processes took of the machine; on a 2-core host that is
not what moves a time: other processes taking 1.45 cores in one run and 1.29 in the next
(within half a core) left xbackend 0.31-0.55 cores in one and 0.55-0.71 in the other, and
a kernel timed by the wall clock read 0.6× as long. So on a CPU device each point also
records, over the window of its samples exactly (every counter here is read to the
microsecond or better, none ticks at 10 ms):

- ``stall_share``: the share of that window in which some runnable task waited for a core,
  from Linux's pressure-stall counters (``/proc/pressure/cpu``, the "some" line's total;
  absent where the kernel has none): the machine's contention, whoever waited;
- ``own_cores``: this process's CPU time (every thread: the BLAS's, an OpenCL runtime's)
  over the window's wall time: the share of the cores it got;
- ``waited_cores``: the time this process's threads spent runnable but waiting for a core
  (each thread's ``schedstat``), over the window's wall time: what the host took from it;
- ``involuntary_switches``: how often the scheduler took a core from it (``getrusage``);
- ``sampled_s``: the window.

A reading never raises into a measurement: a counter that cannot be read is left out.

The cores xbackend got move without any contention: on the idle 2-core machine
(2026-11-28 09:47, load average 0.69-0.87) the serial naive kernel's points got 1.46 cores in
one run and 1.04 in the next (its harness's, the BLAS's and the runtime's threads running
or idling), with no task waiting for a core in either. So :func:`differs` counts a
difference in ``own_cores`` only where some task waited in either run (:func:`waited`):
a stall share of ``WAITED_STALL`` or more, or xbackend's threads waiting for
``WAITED_CORES`` of a core or more. The 96 points of that idle pair read stall shares of at
most 8.6% (a BLAS on two threads beside the harness, on two cores) and waits of at most
0.036 cores; of the 1,696 points of the loaded runs beside it, the 11 under 10% stall
(another job holding one core) waited for at most 0.009 cores but one, at 5.8% stall, for
0.096 (the stall gate alone would miss it), and the next, at 16%, for 0.33 (docs/diff.md).
"""

from __future__ import annotations

import dataclasses
import glob
import resource
import time
from typing import Any

PRESSURE_FILE = "/proc/pressure/cpu"
_SCHEDSTAT = "/proc/self/task/*/schedstat"
# The A/A floors shipped before issue 53 recorded no contention: a run is taken as measured
# under them while some task waited for a core under this share of the time (the idle
# 2-core machine read 0-4%, docs/diff.md).
QUIET_STALL = 0.1
# Two runs' contention differs where their stall shares are this far apart, or the cores
# the process got (or waited for) differ by this share of a core or more.
STALL_DIFFERS = 0.1
CORES_DIFFER = 0.1
# Some task waited for a core in a point's window: what makes the cores xbackend got a
# figure of the host's, not of its own threads (the module's docstring gives the records).
WAITED_STALL = 0.1
WAITED_CORES = 0.05


@dataclasses.dataclass(frozen=True)
class Counters:
    """The counters at one moment: wall and CPU seconds of this process, the host's
    pressure-stall total (µs), this process's run-queue wait (ns) and involuntary
    switches (None: not counted here)."""

    wall_s: float
    cpu_s: float
    stall_us: int | None
    waited_ns: int | None
    switches: int | None


def _stall_us() -> int | None:
    """The "some" line's ``total=`` of ``/proc/pressure/cpu``: microseconds since boot in
    which at least one runnable task waited for a core."""
    try:
        with open(PRESSURE_FILE, encoding="ascii") as pressure:
            for line in pressure:
                if line.startswith("some "):
                    total = line.rsplit("total=", 1)[1]
                    return int(total.split()[0])
    except (OSError, UnicodeDecodeError, IndexError, ValueError):
        return None
    return None


def _waited_ns() -> int | None:
    """Every thread of this process: nanoseconds runnable but waiting for a core (the
    second field of its ``schedstat``). A thread that ended meanwhile takes its share
    with it: the difference of two readings is a lower bound, never more."""
    total, found = 0, False
    for path in glob.glob(_SCHEDSTAT):
        try:
            with open(path, encoding="ascii") as stat:
                total += int(stat.read().split()[1])
            found = True
        except (OSError, ValueError, IndexError):
            continue
    return total if found else None


def read() -> Counters:
    try:
        switches: int | None = resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw
    except (OSError, AttributeError):
        switches = None
    return Counters(time.perf_counter(), time.process_time(), _stall_us(), _waited_ns(), switches)


def between(begin: Counters, end: Counters) -> dict[str, float]:
    """The contention fields of a point's ``host_load`` over the window ``begin``-``end``."""
    window = end.wall_s - begin.wall_s
    if not window > 0:
        return {}
    found = {"sampled_s": round(window, 4),
             "own_cores": round((end.cpu_s - begin.cpu_s) / window, 3)}  # fmt: skip
    if begin.stall_us is not None and end.stall_us is not None:
        stalled = max(0, end.stall_us - begin.stall_us) / 1e6
        found["stall_share"] = round(min(1.0, stalled / window), 3)
    if begin.waited_ns is not None and end.waited_ns is not None:
        found["waited_cores"] = round(max(0, end.waited_ns - begin.waited_ns) / 1e9 / window, 3)
    if begin.switches is not None and end.switches is not None:
        found["involuntary_switches"] = float(end.switches - begin.switches)
    return found


def _value(load: dict[str, Any] | None, field: str) -> float | None:
    value = (load or {}).get(field)
    return None if value is None else float(value)


def contended(load: dict[str, Any] | None, limit: float = QUIET_STALL) -> bool:
    """Whether some task waited for a core more than ``limit`` of a point's window."""
    stall = _value(load, "stall_share")
    return stall is not None and stall > limit


def figures(load: dict[str, Any] | None) -> str:
    """A point's contention in words: "stall 38%, got 0.42 cores, waited 0.31, 212
    involuntary switches" (what it has of them); "" where it has none."""
    parts = []
    for field, text in (("stall_share", "stall {:.0%}"), ("own_cores", "got {:.2f} cores"),
                        ("waited_cores", "waited {:.2f}"),
                        ("involuntary_switches", "{:.0f} involuntary switches")):  # fmt: skip
        value = _value(load, field)
        if value is not None:
            parts.append(text.format(value))
    return ", ".join(parts)


def differs(a: dict[str, Any] | None, b: dict[str, Any] | None, limit: float) -> str | None:
    """Why two points' contention makes a wall-clock change between them unsafe to claim,
    in words with the figures: their stall shares or the cores the process waited for
    differ (``STALL_DIFFERS``, ``CORES_DIFFER``), or the cores it got where some task waited
    in either (:func:`waited`), or either was contended beyond ``limit`` (the stall share
    the A/A floors were measured under); None where none of these."""
    said = []
    stall_a, stall_b = _value(a, "stall_share"), _value(b, "stall_share")
    if stall_a is not None and stall_b is not None:
        if abs(stall_a - stall_b) >= STALL_DIFFERS:
            said.append(f"some task waited for a core {stall_a:.0%} of the time in A, "
                        f"{stall_b:.0%} in B (/proc/pressure/cpu)")  # fmt: skip
        elif max(stall_a, stall_b) > limit:
            said.append(f"the host was contended beyond the A/A floors' {limit:.0%} stall: "
                        f"{stall_a:.0%} in A, {stall_b:.0%} in B")  # fmt: skip
    fields = (("own_cores", "xbackend got"), ("waited_cores", "its threads waited for"))
    for field, what in fields if waited(a, b) else fields[1:]:
        pair = (_value(a, field), _value(b, field))
        if pair[0] is not None and pair[1] is not None and abs(pair[0] - pair[1]) >= CORES_DIFFER:
            said.append(f"{what} {pair[0]:.2f} cores in A, {pair[1]:.2f} in B")
    return "; ".join(said) or None


def waited(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """Whether some task waited for a core in either of two points' windows: a stall share
    of ``WAITED_STALL`` or more, or xbackend's threads waiting for ``WAITED_CORES`` or more;
    also where a point read neither counter (nothing tells that none waited)."""
    for load in (a, b):
        stall, cores = _value(load, "stall_share"), _value(load, "waited_cores")
        if stall is None and cores is None:
            return True
        if (stall or 0.0) >= WAITED_STALL or (cores or 0.0) >= WAITED_CORES:
            return True
    return False


def sentence(loads: list[dict[str, Any] | None], limit: float = QUIET_STALL) -> str | None:
    """What a run's points say of the contention they were measured under, where any was
    contended (``contended``): how many, and the most stall and run-queue wait; None
    where none was, or none was measured."""
    known = [load for load in loads if _value(load, "stall_share") is not None]
    taken = [load for load in known if contended(load, limit)]
    if not taken:
        return None
    stall = max(_value(load, "stall_share") or 0.0 for load in taken)
    waited = max(_value(load, "waited_cores") or 0.0 for load in taken)
    return (
        f"contended: some task waited for a core over {limit:.0%} of the time at {len(taken)} "
        f"of {len(known)} points measured on a CPU (up to {stall:.0%}; xbackend's own threads "
        f"waited up to {waited:.2f} cores): their wall-clock times read slower than on an idle "
        "host, their CPU times far less so (diff judges them by both)"
    )
