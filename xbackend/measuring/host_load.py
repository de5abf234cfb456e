"""The host's load while a point is measured: how much of the machine other processes took.

A time measured on a CPU (the CPU backend, OpenCL on a CPU) halves when another process
takes half the cores, and a GPU's end-to-end time moves with the host too. Nothing in a
sample says so; this module does. ``HostWatch`` reads the OS's counters as a point's
sampling starts and ends and gives the point's ``host`` record:

- ``others_cores``: the CPU time every other process took over the window, in cores
  (the busy time of ``/proc/stat`` less this process's own, every thread of it: the
  BLAS's, an OpenCL runtime's), over the window's wall time;
- ``load_1m``: the OS's one-minute load average at the end (this process's threads in it);
- ``window_s``: the window the counters cover. The counters tick every 10 ms, so a window
  shorter than ``MIN_WINDOW_S`` reaches back to an earlier reading of this process
  (another point's, at most ``MAX_WINDOW_S`` before): a point of 20 ms says what the
  machine did over the last half second, not 20 ms of rounding (a window that still
  covers less than ``COUNTED_WINDOW_S`` gives no ``others_cores``: it is not known);
- ``throttle_events``: the cores' thermal-throttle events over the window, where the OS
  counts them (Linux's ``thermal_throttle``; absent elsewhere);
- on a CPU device, the contention this process met over its samples exactly (the
  pressure-stall share, the cores it got and waited for, its involuntary switches:
  ``contention.py``);
- ``probe_us``, on a CPU device: the fastest of a few runs of a fixed loop of Python
  (``probe_s``), before the samples and after them (``probe_after_us``): how fast the
  host ran this process then. A virtual machine's host that gives its core to another
  guest shows in no counter of this one (on an H200's 16-core host, CPU lines ran 2×
  slower in one run than the run before with other processes at 0.0 cores); the probe
  shows what reached this process, and ``diff`` compares it between runs.

Where the OS has no such counters (not Linux), only the load average is kept, if any.
A reading never raises into a measurement: what cannot be read is left out.
"""

from __future__ import annotations

import collections
import dataclasses
import glob
import math
import os
import time
from typing import Any, ClassVar

from xbackend.measuring import contention

MIN_WINDOW_S = 0.5
MAX_WINDOW_S = 5.0
# Below this window the counters' 10 ms ticks say nothing: no ``others_cores`` is given.
COUNTED_WINDOW_S = 0.1
# Other processes' work, in cores, from which the host counts as busy: half a core taken
# away is enough to move a time measured on the CPU by more than its 1% target.
BUSY_CORES = 0.5
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_THROTTLE_FILES = "/sys/devices/system/cpu/cpu*/thermal_throttle/core_throttle_count"


@dataclasses.dataclass(frozen=True)
class Reading:
    """The host's counters at one moment: wall seconds, every core's busy seconds, this
    process's CPU seconds, and the summed throttle events (None: not counted here)."""

    wall_s: float
    busy_s: float | None
    own_s: float
    throttles: int | None


def _busy_seconds() -> float | None:
    """Every core's non-idle time since boot, from ``/proc/stat``'s first line."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = stat.readline().split()
    except (OSError, UnicodeDecodeError):
        return None
    if len(fields) < 8 or fields[0] != "cpu":
        return None
    try:
        user, nice, system, _idle, _iowait, irq, softirq, *rest = (int(f) for f in fields[1:])
    except ValueError:
        return None
    steal = rest[0] if rest else 0
    return (user + nice + system + irq + softirq + steal) / _TICK


def _throttle_events() -> int | None:
    total, found = 0, False
    for path in glob.glob(_THROTTLE_FILES):
        try:
            with open(path, encoding="ascii") as count:
                total += int(count.read().strip() or 0)
            found = True
        except (OSError, ValueError):
            continue
    return total if found else None


def read() -> Reading:
    times = os.times()
    return Reading(time.monotonic(), _busy_seconds(), times.user + times.system, _throttle_events())


_PROBE_LOOPS = 20_000  # about 0.5 ms of CPython on a 2026 server core


def probe_s(repeats: int = 5) -> float:
    """The fastest of ``repeats`` runs of a fixed loop of Python: this process's speed on
    the host now (a few milliseconds in all)."""
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        total = 0
        for value in range(_PROBE_LOOPS):
            total += value
        best = min(best, time.perf_counter() - start)
    return best


def load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def between(begin: Reading, end: Reading) -> dict[str, Any]:
    """The ``host`` record of the window from ``begin`` to ``end``."""
    window = end.wall_s - begin.wall_s
    found: dict[str, Any] = {"window_s": round(window, 3)}
    load = load_average()
    if load is not None:
        found["load_1m"] = load
    if begin.busy_s is not None and end.busy_s is not None and window >= COUNTED_WINDOW_S:
        others = (end.busy_s - begin.busy_s) - (end.own_s - begin.own_s)
        found["others_cores"] = round(max(0.0, others) / window, 2)
    if begin.throttles is not None and end.throttles is not None:
        found["throttle_events"] = end.throttles - begin.throttles
    return found


class HostWatch:
    """Watches the host over one point's sampling (``start``, then ``finish``).

    Readings of earlier points in this process are kept for ``MAX_WINDOW_S``, so that a
    short point's window can reach back to one at least ``MIN_WINDOW_S`` before its end.
    """

    _recent: ClassVar[collections.deque[Reading]] = collections.deque(maxlen=64)

    def __init__(self, probe: bool = False) -> None:
        self._begin: Reading | None = None
        self._probe = probe
        self._probed: float | None = None
        self._counters: contention.Counters | None = None

    def start(self) -> None:
        if self._probe:
            self._probed = probe_s()
            # On a CPU device, what the host took from this process over the samples
            # exactly (contention.py): read last, so the probe is outside the window.
            self._counters = contention.read()
        self._begin = read()
        HostWatch._recent.append(self._begin)

    def finish(self) -> dict[str, Any]:
        counted = contention.read() if self._counters is not None else None
        end = read()
        begin = self._begin or end
        if end.wall_s - begin.wall_s < MIN_WINDOW_S:
            earlier = [
                r for r in HostWatch._recent
                if MIN_WINDOW_S <= end.wall_s - r.wall_s <= MAX_WINDOW_S
            ]  # fmt: skip
            if earlier:
                begin = earlier[-1]  # the newest that is old enough
        HostWatch._recent.append(end)
        found = between(begin, end)
        if self._counters is not None and counted is not None:
            found.update(contention.between(self._counters, counted))
        if self._probed is not None:
            found["probe_us"] = round(self._probed * 1e6, 2)
            found["probe_after_us"] = round(probe_s() * 1e6, 2)
        return found


# Other processes' cores from which a core counts as taken (cores_left): a quarter of a core
# beside one BLAS thread is enough to hold up the others at each of its barriers.
_TAKEN_FROM = 0.25


def cores_left(cores: int | None = None) -> int:
    """The cores other processes leave this one now (at least 1): this process's cores
    (its affinity) less what others took since the newest reading of an earlier point or
    call at least ``COUNTED_WINDOW_S`` old (at most ``MAX_WINDOW_S``; none: it waits until
    the oldest recent one is, ``COUNTED_WINDOW_S`` at most, once after each quiet spell),
    each part of a core past ``_TAKEN_FROM`` counting whole."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    now = read()
    recent = [r for r in HostWatch._recent if now.wall_s - r.wall_s <= MAX_WINDOW_S]
    if not recent:
        HostWatch._recent.append(now)
        recent = [now]
    oldest = recent[0]
    if now.wall_s - oldest.wall_s < COUNTED_WINDOW_S:
        time.sleep(COUNTED_WINDOW_S - (now.wall_s - oldest.wall_s))
        now = read()
    begin = [r for r in recent if now.wall_s - r.wall_s >= COUNTED_WINDOW_S][-1]
    others = between(begin, now).get("others_cores")
    taken = 0 if others is None else max(0, math.ceil(float(others) - _TAKEN_FROM))
    return max(1, cores - taken)


def busy(host: dict[str, Any] | None) -> bool:
    """Whether other processes took at least ``BUSY_CORES`` over a point (a ``host`` record;
    None, or one without ``others_cores``: not known, so not busy)."""
    return host is not None and float(host.get("others_cores") or 0.0) >= BUSY_CORES


def header() -> dict[str, Any]:
    """The host as a run starts: the OS's 1, 5 and 15-minute load averages (each point
    then says what other processes took while it was measured)."""
    try:
        return {"load": [round(value, 2) for value in os.getloadavg()]}
    except (AttributeError, OSError):
        return {}


def busy_sentence(loads: list[dict[str, Any] | None]) -> str | None:
    """What a run's points say of its host, in a sentence where it was busy (``busy``
    at one point or more): how many points, and the most other processes took; None
    where it was quiet throughout, or no point knows."""
    known = [load for load in loads if load is not None and "others_cores" in load]
    taken = [load for load in known if busy(load)]
    if not taken:
        return None
    most = max(float(load["others_cores"]) for load in taken)
    return (
        f"the host was busy: other processes took half a core or more during {len(taken)} "
        f"of {len(known)} measured points (up to {most:.2g} cores); times measured on a "
        "CPU there read slower than on a quiet machine"
    )


def probe_ratio(a: dict[str, Any] | None, b: dict[str, Any] | None) -> float | None:
    """How much slower the host ran the probe in ``b`` than in ``a`` (each the mean of
    its reading before and after its samples); None where either has none."""
    means = []
    for load in (a or {}, b or {}):
        readings = [float(load[k]) for k in ("probe_us", "probe_after_us") if k in load]
        if not readings or min(readings) <= 0:
            return None
        means.append(sum(readings) / len(readings))
    return means[1] / means[0]


# A probe's reading after a point's samples this far from its reading before: the host's
# speed changed while the point was measured (the probe's own spread: 1-3%).
UNSTEADY = 0.1


def speed_changed(ratio: float) -> bool:
    """Whether two readings of the probe, ``ratio`` apart, say the host ran at another
    speed: ``UNSTEADY`` or more either way."""
    return ratio > 0 and max(ratio, 1 / ratio) >= 1 + UNSTEADY


def unsteady(load: dict[str, Any] | None) -> bool:
    """Whether the host ran this process at another speed after a point's samples than
    before them (its probe, on a CPU device)."""
    if not load or "probe_us" not in load or "probe_after_us" not in load:
        return False
    before, after = float(load["probe_us"]), float(load["probe_after_us"])
    return before > 0 and speed_changed(after / before)


def unsteady_sentence(noisy: list[dict[str, Any] | None], probed: int) -> str | None:
    """Of the noisy points' ``host_load`` records, how many were measured while the host's
    speed changed, in a sentence (``probed``: the points that ran the probe); None where
    none was."""
    changed = sum(unsteady(load) for load in noisy)
    if not changed:
        return None
    return (
        f"the host's own speed changed under {changed} of the {len(noisy)} noisy points: a "
        f"fixed probe run before and after their samples differed by {UNSTEADY:.0%} or more "
        f"(at {probed} points probed in all): their noise is at least in part the machine's "
        "(in a virtual machine no counter of the OS shows it)"
    )


def sentences(loads: list[dict[str, Any] | None], noisy: list[dict[str, Any] | None]) -> list[str]:
    """What a run's measured points (their ``host_load``; ``noisy``: the noisy ones') say of
    its host: :func:`busy_sentence`, ``contention.sentence`` and :func:`unsteady_sentence`,
    where they say anything."""
    probed = sum("probe_us" in (load or {}) for load in loads)
    found = (busy_sentence(loads), contention.sentence(loads), unsteady_sentence(noisy, probed))
    return [sentence for sentence in found if sentence]
