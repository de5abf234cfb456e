"""Energy per product as the records hold it (``--energy``, docs/energy.md): a point's
joules and GFLOP per joule, and one point's joules in two runs compared (``xbackend diff``).

A point holds one reading of its energy: the device's counter over a window of its
product launched back to back (``sampler.measure_energy``). One reading has no spread, so
no interval, and the A/A floors of ``floors.py`` are of times: diff judges joules by a
fixed tolerance, ``TOLERANCE``. One A/A pair has been measured (an H200, 2026-11-27, one-
second windows aligned to the counter's steps): 15 points read 0.958-1.020x each other's
joules, within 10%; the joules of a product are its power times its time, so they move at
least as far as its time does, and further with the power's drift (clocks, temperature).
``xbackend diff --energy-tolerance`` changes it (docs/energy.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from xbackend.measuring.sampler import joules_per_product
from xbackend.results import PointRecord

TOLERANCE = 0.10  # one A/A pair read within 2-4.2% (the docstring); not a floor per kind
MORE, LESS, WITHIN = "MORE", "LESS", "WITHIN"  # B's joules against A's
ENERGY_FIELDS = ("a_joules", "b_joules", "joules_ratio", "energy")  # diff.csv's columns


def joules(point: PointRecord) -> float | None:
    """The point's joules per product where ``--energy`` read them, else None."""
    return joules_per_product(point.state)


def gflops_per_joule(point: PointRecord) -> float | None:
    """The point's GFLOP per joule where ``--energy`` read the device's energy counter
    over its product launched back to back (``sampler.measure_energy``), else None."""
    found = joules(point)
    return None if found is None else point.flops / found / 1e9


def has_energy(points: Iterable[PointRecord]) -> bool:
    """Whether any of ``points`` holds a reading of its energy."""
    return any(joules(point) is not None for point in points)


@dataclasses.dataclass(frozen=True)
class EnergyChange:
    """One point's joules per product in A and in B, their ratio B/A, and whether it
    moved past the tolerance (MORE, LESS) or not (WITHIN)."""

    a_joules: float
    b_joules: float
    tolerance: float

    @property
    def ratio(self) -> float:
        return self.b_joules / self.a_joules

    @property
    def verdict(self) -> str:
        if self.ratio > 1.0 + self.tolerance:
            return MORE
        if self.ratio < 1.0 / (1.0 + self.tolerance):
            return LESS
        return WITHIN

    @property
    def moved(self) -> bool:
        return self.verdict != WITHIN


def compare(a: PointRecord, b: PointRecord, tolerance: float = TOLERANCE) -> EnergyChange | None:
    """The change of a point's joules from A to B where both runs read them, both points
    measured and trusted (a time above the device's peak says the product was not what
    it claims: its joules are of that product too); None otherwise. A wrong result's
    joules are compared, as its time is (diff's note says it is wrong)."""
    if not tolerance >= 0:
        raise ValueError(f"energy tolerance {tolerance}: expected a share of 0 or more")
    if not all(point.measured and point.trusted for point in (a, b)):
        return None
    a_joules, b_joules = joules(a), joules(b)
    if a_joules is None or b_joules is None:
        return None
    return EnergyChange(a_joules, b_joules, tolerance)


def row(change: EnergyChange | None) -> dict[str, object]:
    """The energy's columns of a diff row (``ENERGY_FIELDS``; None where not compared)."""
    if change is None:
        return dict.fromkeys(ENERGY_FIELDS)
    return {"a_joules": change.a_joules, "b_joules": change.b_joules,
            "joules_ratio": change.ratio, "energy": change.verdict}  # fmt: skip


def counts(changes: Iterable[EnergyChange | None]) -> dict[str, int]:
    """How many compared joules moved each way, or not: MORE, LESS, WITHIN (those none
    has left out)."""
    found = [change.verdict for change in changes if change is not None]
    return {name: found.count(name) for name in (MORE, LESS, WITHIN) if name in found}
