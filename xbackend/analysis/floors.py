"""How far two runs of the same plan differ with nothing changed: the A/A floor under every
verdict of ``xbackend diff``.

A point's interval covers the noise of its own samples, taken within a few hundred
milliseconds; it covers nothing of what moves between two runs: a GPU that boosts to
another clock, a host whose other work comes and goes, caches and memory laid out anew.
On an H100 two runs of the default plan read CUDA kernels of 2-4 µs 5-11% apart with
intervals of ±0.3% (docs/notebook/measurement.md): a verdict from the interval alone is a false
one. So each verdict needs a change beyond the floor of its kind of point: the largest
change that runs of the same plan showed, by the clock that timed the point (its
``clock``) and the decade of its median time.

A floor is a property of a device and its load, so a kind is the point's device as well
("NVIDIA H200 | globaltimer 1e-6"): one machine's floors never apply to another's points
(files from before, format 1, keyed by clock alone, still apply to any device). Floors come
from pairs of runs of the same plan (``xbackend diff A1 A2 --write-floors FILE``, which
keeps the largest change of each kind over every pair written into the file);
``FLOORS_FILE`` ships the ones measured on the machines we ran on, each kind naming its
device. A kind no pair measured has no floor beyond the threshold.

Bounded: a floor, margin included, is at most ``BOUND`` (40%), so no floor hides a change of
1.5× on a quiet machine. A change past ``NOT_AA`` (2×) between two runs is not what runs of
the same plan differ by, but a change (an A/B pair given to ``--write-floors``, or a
machine that was busy in one run): it is left out of the floors and counted
(``Floors.refused``). What moves with the host's load is judged by the load each point
recorded (``diff.py``), not by a floor.

A point shorter than every class measured of its device and clock (the CPU's BLAS at 16×14,
826 ns, where the shortest class measured is 1-10 µs) takes the shortest class's floor
(:meth:`Floors.kind`): a shorter time is no quieter between runs (a timer's resolution and
the harness weigh more in it). Without it such a point was judged by the threshold alone,
and an unchanged BLAS call read SLOWER at 1.11× on the idle 2-core machine. The ten pairs
with the CPU backend of 2026-11-28 (docs/diff.md) moved that point by 1.2-11%, which with
``MARGIN`` asks 17%; the CPU's 1-10 µs floor, bounded, asks 40%. A class missing between
two measured ones, or above the longest, is not filled: no floor there beyond the threshold.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path

from xbackend.measuring.contention import QUIET_STALL
from xbackend.results import PointRecord
from xbackend.safeio import atomic_write, read_small_text

FLOORS_FILE = Path(__file__).with_name("aa_floors.json")
FORMAT = 2
BOUND = 0.4  # the most a floor asks of a change, margin included: 1.5× always clears it
NOT_AA = 1.0  # a change of 2× or more between two runs is no A/A change
_DEVICE = " | "  # between a kind's device and its clock
# The largest change a few pairs showed underestimates the largest the next pair will
# show: a verdict must clear the floor with this margin. Checked out of sample on four
# runs on an H100: the floors of three runs' pairs, without it, let 0-5 false verdicts of
# 304 through on the pairs of the fourth; with it, see docs/notebook/measurement.md.
MARGIN = 1.5


def decade(seconds: float) -> int:
    """The decade of a time: -6 for 1-10 µs, -3 for 1-10 ms."""
    return math.floor(math.log10(seconds))


def kind_of(point: PointRecord) -> str | None:
    """The kind a point's floor is kept under, "DEVICE | CLOCK 1e-6" (its device, its
    clock, its median's decade); None for a point with no median."""
    clocked = _clock_kind(point)
    return None if clocked is None else f"{point.device}{_DEVICE}{clocked}"


def _clock_kind(point: PointRecord) -> str | None:
    """A format-1 kind, "CLOCK 1e-6", of any device."""
    median = point.kernel_median_s
    if median is None or not median > 0:
        return None
    return f"{point.clock or 'unknown'} 1e{decade(median)}"


def describe(kind: str) -> str:
    """A kind in words: "NVIDIA H200: globaltimer, 1-10 µs" ("globaltimer, 1-10 µs" for a
    kind of any device)."""
    device, _, kind = kind.rpartition(_DEVICE)
    clock, _, power = kind.partition(" ")
    low = 10.0 ** int(power.removeprefix("1e"))
    units = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))
    unit, scale = next((u, s) for u, s in units if low >= s * 0.999)
    return f"{device + ': ' if device else ''}{clock}, {low / scale:g}-{10 * low / scale:g} {unit}"


@dataclasses.dataclass(frozen=True)
class Floors:
    """The largest change seen between runs of the same plan, by kind of point."""

    shares: Mapping[str, float] = dataclasses.field(default_factory=dict)
    pairs: int = 0  # how many A/A pairs they come from
    how: str = ""  # where and how they were measured
    refused: int = 0  # changes past NOT_AA left out (measured, not read from a file)
    # The most pressure-stall share (contention.py) of the CPU points they were measured on;
    # None: not recorded (files from before issue 53).
    stall: float | None = None

    @property
    def stall_limit(self) -> float:
        """The contention a CPU point may have been measured under for these floors to hold:
        what they were measured under, and at least ``contention.QUIET_STALL``."""
        return max(QUIET_STALL, self.stall or 0.0)

    def kind(self, point: PointRecord) -> str | None:
        """The kind whose floor applies to ``point``: its device's, else one of any device
        (format 1); for a point shorter than every class measured of its clock, the
        shortest (its device's, else of any device: :meth:`_shortest_above`); None where
        no pair measured it."""
        for kind in (kind_of(point), _clock_kind(point)):
            if kind is not None and kind in self.shares:
                return kind
        return self._shortest_above(point)

    def _shortest_above(self, point: PointRecord) -> str | None:
        """The shortest class measured of the point's device and clock (else of its clock,
        any device), where the point's median lies below every one of them."""
        clocked = _clock_kind(point)
        if clocked is None:
            return None
        clock, _, power = clocked.rpartition(" 1e")
        for prefix in (f"{point.device}{_DEVICE}{clock} 1e", f"{clock} 1e"):
            tails = [kind[len(prefix) :] for kind in self.shares if kind.startswith(prefix)]
            powers = [int(tail) for tail in tails if tail.lstrip("-").isdigit()]
            if powers and min(powers) > int(power):
                return f"{prefix}{min(powers)}"
        return None

    def described(self, point: PointRecord) -> str:
        """The kind whose floor applies to ``point`` in words (:func:`describe`), saying so
        where it is the shortest class measured, taken for a shorter point; "" where none."""
        kind = self.kind(point)
        if kind is None:
            return ""
        clocked = _clock_kind(point) or ""
        if kind in (kind_of(point), clocked):
            return describe(kind)
        own = describe(clocked).partition(", ")[2]
        return f"{describe(kind)}, the shortest class measured, for a point of {own}"

    def floor(self, point: PointRecord) -> float:
        """The change a verdict on this point must clear: its kind's floor with MARGIN,
        at most BOUND (0: none measured)."""
        kind = self.kind(point)
        return min(MARGIN * self.shares[kind], BOUND) if kind is not None else 0.0

    def merged(self, other: Floors) -> Floors:
        """Both files' floors, the larger of each kind (never past NOT_AA)."""
        shares = dict(self.shares)
        for kind, share in other.shares.items():
            shares[kind] = max(share, shares.get(kind, 0.0))
        how = "; ".join(text for text in (self.how, other.how) if text)
        stalls = [s for s in (self.stall, other.stall) if s is not None]
        return Floors(shares, self.pairs + other.pairs, how, self.refused + other.refused,
                      max(stalls) if stalls else None)  # fmt: skip

    def to_dict(self) -> dict[str, object]:
        stall = {} if self.stall is None else {"stall": self.stall}
        return {"format": FORMAT, "pairs": self.pairs, "how": self.how, **stall,
                "floors": dict(sorted(self.shares.items()))}  # fmt: skip


def measured(pairs: Iterable[tuple[PointRecord, PointRecord]], how: str = "") -> Floors:
    """The floors one A/A pair shows: for each kind of point, the largest change of its
    median between the two runs, up or down (max(B/A, A/B) - 1); a change of NOT_AA or
    more is no A/A change: left out, and counted in ``refused``."""
    shares: dict[str, float] = {}
    refused, stalls = 0, []
    for a, b in pairs:
        stalls += [float(p.host_load["stall_share"]) for p in (a, b)
                   if p.host_load and "stall_share" in p.host_load]  # fmt: skip
        kind, a_s, b_s = kind_of(a), a.kernel_median_s, b.kernel_median_s
        if kind is None or not (a.trusted and b.trusted) or not a_s or not b_s:
            continue
        change = max(b_s / a_s, a_s / b_s) - 1.0
        if change >= NOT_AA:
            refused += 1
            continue
        shares[kind] = max(change, shares.get(kind, 0.0))
    return Floors(shares, 1, how, refused, max(stalls) if stalls else None)


def load(path: Path) -> Floors:
    """A floors file (``--floors``); ValueError naming the file where it is not one (a
    device, a FIFO or a runaway file is refused unread, as the tune cache is)."""
    try:
        data = json.loads(read_small_text(path))
        shares = {str(kind): float(share) for kind, share in data["floors"].items()}
        if not all(0.0 <= share < math.inf for share in shares.values()):
            raise ValueError("a floor is negative or not finite")
        pairs = data.get("pairs", 0)
        if not (isinstance(pairs, int) and 0 <= pairs < 2**31):
            raise ValueError(f"pairs {pairs!r:.40}: expected a count")
        stall = data.get("stall")
        if stall is not None and not (_is_share(stall)):
            raise ValueError(f"stall {stall!r:.40}: expected a share from 0 to 1")
        return Floors(shares, pairs, str(data.get("how", "")), stall=stall)
    except RecursionError:  # JSON nested deeper than Python's stack
        raise ValueError(f"{path}: not a floors file (nested too deep)") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, OverflowError) as error:
        raise ValueError(f"{path}: not a floors file ({error})") from error


def _is_share(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1


def save(floors: Floors, path: Path) -> None:
    """Write ``floors`` to ``path``, whole or not at all."""
    atomic_write(path, json.dumps(floors.to_dict(), indent=1, ensure_ascii=False) + "\n")


def shipped() -> Floors:
    """The floors measured for xbackend's own machines (``FLOORS_FILE``)."""
    return load(FLOORS_FILE) if FLOORS_FILE.is_file() else Floors()
