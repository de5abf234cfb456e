"""Which candidates ``xbackend tune`` times: every one, or coarse to fine; and which
variants it searches for each operation (``tunable``) at which sizes (``items``).

The search space of a variant (``tuning.search_space``) is every block tile with the
patches, slab depths and group tiles worth trying there, times the K splits where the
output is too small to fill the device: 22 to 26 configurations for a large output, 110
to 130 for a small one. Each configuration but its splits is a build of its own, and on
a GPU building costs more than timing: on an H100, the 22 configurations of a 4096³
search took 37.6 s, the 110 of a 1000×3001×1000 search (22 builds) 23.4 s.

``exhaustive`` times them all. ``coarse`` (the default) builds few, in two stages:

1. one configuration per block tile (BM×BN): its largest patch per thread, at the
   shallowest slab;
2. every other configuration of the best COARSE_KEEP block tiles
   (``block_tiles.BlockTiles.search``: a geometry searches its own space).

Each configuration built is timed at every K split of the space: a split is an
argument of the launch, so it costs a timing and no build. The block tile decides most
of the speed (how many blocks fill the device, how much each reuses its slabs); the
patch and the depth then move it by some percent. Replayed on the exhaustive searches
of an H100 (``tests/test_tune_search.py``), the coarse search builds about half of the
configurations and finds a best within 5% of the exhaustive one, equal on large
outputs; the finalists' race then decides among the close ones.

A stage is timed as one batch (``Timer``), so that the tuner can build all of its
configurations at once, in parallel (``Backend.prebuild``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from xbackend.launches.choices import Candidate, Timer, Trial, shape_class
from xbackend.launches.geometries import per_product
from xbackend.launches.geometry import Geometry
from xbackend.operations import Shape, operation

if TYPE_CHECKING:
    from xbackend.backends.interface import Backend

SEARCHES = ("coarse", "exhaustive")
FINALIST_TIME_S = 3.0  # the finalists' race's time cap (tuning.race), per search


def search(
    space: Sequence[Candidate], time: Timer, how: str = "coarse", geometry: Geometry | None = None
) -> list[Trial]:
    """The trials of a search of ``space``: all of it (``exhaustive``), or as its
    ``geometry`` searches coarsely (``coarse``: block tiles coarse to fine; the tiles or
    parameters of any other variant are all timed)."""
    if how not in SEARCHES:
        raise ValueError(f"search {how!r}: expected one of {', '.join(SEARCHES)}")
    if how == "exhaustive" or geometry is None:
        return time(list(space))
    return geometry.search(space, time)


def tuned_variants(backend: Backend, op: str) -> list[str]:
    """The variants of ``op`` on ``backend`` whose parameters ``tune`` searches unasked:
    the block tiles (mm_warp), and a user's fixed-tile variants that declare several
    tiles (their family's search space); a shipped fixed-tile variant only when named
    (``searchable``)."""
    found = []
    for variant in backend.variants(op):
        spec = backend.variant_spec(variant, op)
        if per_product(spec) or (spec.user and searchable(backend, variant, op)):
            found.append(variant)
    return found


def searchable(backend: Backend, variant: str, op: str) -> bool:
    """Whether ``tune`` can search ``variant``: its block tiles, or the several tiles its
    family declares."""
    spec = backend.variant_spec(variant, op)
    return per_product(spec) or (bool(spec.kernel) and len(list(spec.space())) > 1)


def _names(variants: Sequence[str]) -> str:
    return f"{', '.join(variants)} {'has' if len(variants) == 1 else 'have'}"


def tunable(
    backend: Backend, variants: Iterable[str] | None, ops: Iterable[str], dtype: Any
) -> tuple[dict[str, list[str]], list[str]]:
    """The variants ``tune`` searches for each operation of ``ops``: those of ``variants``
    (None: all) that are tuned for it and run here; and one line for each operation that
    some of ``variants`` cannot be tuned for, naming them and those that can, so that a
    variant with nothing to tune (mm's vec4 for rmm) is said, not dropped without a word."""
    wanted = None if variants is None else list(variants)
    plan: dict[str, list[str]] = {}
    notes: list[str] = []
    for op in ops:
        tuned = tuned_variants(backend, op)
        asked = tuned if wanted is None else wanted
        if wanted is not None:  # a fixed-tile variant named is searched over its tiles
            known = backend.variants(op)
            tuned = [v for v in known if v in tuned or (v in asked and searchable(backend, v, op))]
        untuned = [variant for variant in asked if variant not in tuned]
        if untuned:
            notes.append(f"{_names(untuned)} nothing to tune for {op} (the variants of {op} "
                         f"that can be tuned: {', '.join(tuned) or 'none'})")  # fmt: skip
        runnable = backend.runnable_variants(op, dtype)
        for variant in (v for v in asked if v in tuned and v not in runnable):
            problem = backend.variant_problem(variant, dtype, op)
            notes.append(f"{variant} cannot run {op} here: {problem}")
        plan[op] = [variant for variant in asked if variant in tuned and variant in runnable]
    return plan, notes


@dataclasses.dataclass(frozen=True)
class TuneItem:
    """One search ``tune`` makes: a variant of an operation at a size, searched and raced
    whole on one device; its choice is the cache's entry of the size's shape class (a
    later search of the same class replaces it)."""

    variant: str
    op: str
    shape: Shape
    shape_class: str = ""  # choices.shape_class on the device

    @property
    def entry(self) -> tuple[str, str, str]:
        """What its cache entry is keyed by on a device model."""
        return (self.variant, self.op, self.shape_class)

    def __str__(self) -> str:
        return f"{self.shape} {self.op} {self.variant}"


def items(
    backend: Backend,
    variants: Iterable[str] | None,
    shapes: Iterable[Shape],
    ops: Iterable[str],
    dtype: Any,
) -> tuple[list[TuneItem], list[str]]:
    """The searches of a ``tune``, in its order (by size, then operation, then variant),
    and the lines that say what is left out and why (``tunable``; an operation a size
    cannot have: rmm at an odd M or N)."""
    ops = list(ops)
    plan, notes = tunable(backend, variants, ops, dtype)
    found = []
    for shape in shapes:
        for op in ops:
            problem = operation(op).shape_problem(shape.M, shape.N)
            if problem:
                notes.append(f"{shape}: {op} skipped ({problem})")
                continue
            output = operation(op).output_size(shape)
            key = shape_class(*output, backend.device.compute_units or 0)
            found += [TuneItem(variant, op, shape, key) for variant in plan[op]]
    return found, notes
