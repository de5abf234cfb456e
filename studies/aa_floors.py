"""A/A floors from runs of the same plan, checked on runs they were not made from, and a
planted slowdown found through them (docs/notebook/measurement.md, "Verdicts that hold between
runs").

    python studies/aa_floors.py RUN1 RUN2 RUN3 ... [--plant LABEL:VARIANT] [--write FILE]
                                [--first N]

Every pair of runs is an A/A pair. Leaving one run out at a time, the floors of the pairs
among the others (``floors.measured``, merged) judge the pairs that hold the run left
out: each FASTER or SLOWER there is a false verdict. With ``--first N``, the floors of the
pairs among the first N runs judge each later run against the one after it, in a row.
With ``--plant``, that configuration's samples in B are slowed by 10% (every sample times
1.10) and the share of its points found SLOWER is counted, with the false verdicts of every other
configuration. ``--write`` keeps the floors of all the pairs.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from xbackend.analysis import diff, floors
from xbackend.results import PointRecord, latest, load

PLANTED = 1.10


def _points(run: Path) -> list[PointRecord]:
    return latest(load([run]).points)


def _floors(runs: dict[str, list[PointRecord]], names: Sequence[str]) -> floors.Floors:
    found = floors.Floors()
    for a, b in itertools.combinations(names, 2):
        found = found.merged(diff.aa_floors(diff.compare_points(runs[a], runs[b]), f"{a} / {b}"))
    return found


def _slowed(points: list[PointRecord], line: tuple[str, str]) -> list[PointRecord]:
    """B with one configuration's samples slowed by PLANTED."""
    found = []
    for point in points:
        if (point.label, point.variant) == line and point.kernel_samples_s:
            samples = [s * PLANTED for s in point.kernel_samples_s]
            stats = {**(point.kernel_s or {})}
            for field in ("median", "q1", "q3", "min", "max", "mean", "ci_low", "ci_high"):
                if field in stats:
                    stats[field] *= PLANTED
            point = dataclasses.replace(point, kernel_samples_s=samples, kernel_s=stats)
        found.append(point)
    return found


def _trials(names: list[str], first: int | None) -> list[tuple[list[str], str, str]]:
    """(the runs the floors come from, A, B) of each pair judged."""
    if first is not None:
        later = names[first:]
        return [(names[:first], a, b) for a, b in itertools.pairwise(later)]
    found = []
    for out in names:
        rest = [n for n in names if n != out]
        found += [(rest, other, out) for other in rest]
    return found


def _judged(
    runs: dict[str, list[PointRecord]], a: str, b: str, found: floors.Floors,
    plant: tuple[str, str] | None,
) -> str:  # fmt: skip
    """One pair judged through ``found``: its false verdicts, and the plant's share."""
    slowed = _slowed(runs[b], plant) if plant else runs[b]
    judged = [c for c in diff.compare_points(runs[a], slowed, floors=found) if c.judged]
    wrong = Counter(
        (c.key.label, c.key.variant, c.verdict)
        for c in judged
        if c.verdict in (diff.FASTER, diff.SLOWER)
        and (plant is None or (c.key.label, c.key.variant) != plant)
    )
    line = f"{sum(wrong.values())} false verdicts of {len(judged)}"
    line += f" {dict(wrong)}" if wrong else ""
    if plant:
        planted = [c for c in judged if (c.key.label, c.key.variant) == plant]
        slower = sum(c.verdict == diff.SLOWER for c in planted)
        line += f"; planted {PLANTED:.2f}× found SLOWER at {slower} of {len(planted)}"
    return line


def check(
    runs: dict[str, list[PointRecord]], plant: tuple[str, str] | None, first: int | None
) -> None:
    made: dict[tuple[str, ...], floors.Floors] = {}
    for rest, a, b in _trials(list(runs), first):
        if tuple(rest) not in made:
            made[tuple(rest)] = _floors(runs, rest)
        source = ", ".join(rest) if len(rest) < 5 else f"{rest[0]}…{rest[-1]}"
        print(f"{a} / {b} (floors from {source}): "
              f"{_judged(runs, a, b, made[tuple(rest)], plant)}", flush=True)  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--plant", default=None, metavar="LABEL:VARIANT")
    parser.add_argument("--write", type=Path, default=None, metavar="FILE")
    parser.add_argument("--how", default="", help="where and how the runs were made")
    parser.add_argument(
        "--first",
        type=int,
        default=None,
        metavar="N",
        help="floors from the first N runs; judge the later ones in a row",
    )
    args = parser.parse_args()
    runs = {path.name: _points(path) for path in args.runs}
    plant = tuple(args.plant.split(":", 1)) if args.plant else None
    check(runs, plant, args.first)
    if args.write:
        found = _floors(runs, list(runs))
        found = dataclasses.replace(found, how=args.how or found.how)
        floors.save(found, args.write)
        for kind, share in sorted(found.shares.items()):
            print(f"{floors.describe(kind):32} ±{share * 100:.3g}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
