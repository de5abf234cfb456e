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
2. every other configuration of the best COARSE_KEEP block tiles.

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
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from xbackend.backends import warp
from xbackend.operations import Shape, operation

if TYPE_CHECKING:
    from xbackend.backends.interface import Backend

SEARCHES = ("coarse", "exhaustive")
COARSE_KEEP = 2  # block tiles whose every configuration the second stage times
FINE_KEEP = 2  # configurations whose every K split the third stage times
Key = TypeVar("Key")
FINALIST_TIME_S = 3.0  # the finalists' race's time cap (tuning.race), per search


@dataclasses.dataclass(frozen=True)
class TileChoice:
    """A candidate of a fixed-tile variant (a family of the "element" geometry, a user's
    too): its tile, the one parameter it takes (``-D...=TILE`` in its manifest)."""

    TILE: int
    slices: int = 1  # no split along K: what a cache entry of a split reads

    @property
    def label(self) -> str:
        return f"T={self.TILE}"

    def to_dict(self) -> dict[str, int]:
        return {"TILE": self.TILE}

    def output_tiles(self, M: int, N: int) -> int:
        """The groups of a launch over an M×N output."""
        return -(-M // self.TILE) * -(-N // self.TILE) if self.TILE > 0 else 0


@dataclasses.dataclass(frozen=True)
class ParameterChoice:
    """A candidate of a variant whose family declares parameters (``parameters`` in its
    manifest, as Kernel Tuner's ``tune_params``): its tile where it takes one, and a value
    of each parameter."""

    values: tuple[tuple[str, int], ...]
    slices: int = 1  # no split along K

    @property
    def label(self) -> str:
        return " ".join(f"{name}={value}" for name, value in self.values)

    def to_dict(self) -> dict[str, int]:
        return dict(self.values)


class Candidate(Protocol):
    """What the search and the race time: a configuration with a label, its parameters by
    name (``to_dict``), and its K ranges (``slices``; 1 for a tile)."""

    @property
    def slices(self) -> int: ...

    @property
    def label(self) -> str: ...

    def to_dict(self) -> dict[str, int]: ...


@dataclasses.dataclass
class Trial:
    config: Candidate
    tflops: float | None  # None: not timed (wrong result or error)
    status: str  # "ok", "wrong", or the error


# Times a batch of configurations, one trial each, in their order.
Timer = Callable[[Sequence[Any]], list[Trial]]


def search(space: Sequence[Candidate], time: Timer, how: str = "coarse") -> list[Trial]:
    """The trials of a search of ``space``: all of it (``exhaustive``) or coarse to
    fine (``coarse``, for block tiles; the few tiles of a fixed-tile variant are all
    timed)."""
    if how not in SEARCHES:
        raise ValueError(f"search {how!r}: expected one of {', '.join(SEARCHES)}")
    configs = [c for c in space if isinstance(c, warp.WarpConfig)]
    if how == "exhaustive" or len(configs) < len(space):
        return time(list(space))
    return _coarse_to_fine(configs, time)


def _unsplit(config: warp.WarpConfig) -> warp.WarpConfig:
    return config.with_slices(1)


def _speed(trial: Trial) -> float:
    return trial.tflops or 0.0


def _coarse_to_fine(space: Sequence[warp.WarpConfig], time: Timer) -> list[Trial]:
    """The two stages of the module's docstring, on a space of block tiles."""
    splits: dict[warp.WarpConfig, list[int]] = {}
    for config in space:
        splits.setdefault(_unsplit(config), []).append(config.slices)
    tiles: dict[tuple[int, int], list[warp.WarpConfig]] = {}
    for config in splits:
        tiles.setdefault((config.BM, config.BN), []).append(config)
    trials: list[Trial] = []

    def run(batch: list[warp.WarpConfig]) -> None:
        """Time each configuration of ``batch`` not yet timed, at every K split: a split
        is an argument of the launch, so it costs no build of its own."""
        timed: set[Candidate] = {trial.config for trial in trials}
        fresh = [c.with_slices(s) for c in dict.fromkeys(batch) for s in splits[c]]
        trials.extend(time([config for config in fresh if config not in timed]))

    # 1. coarse: one per block tile, its largest patch at the shallowest slab.
    run([min(group, key=_coarse_rank) for group in tiles.values()])
    # 2. fine: the rest of the best block tiles.
    best_tiles = _best(trials, _block_tile, COARSE_KEEP)
    run([config for tile in best_tiles for config in tiles[tile]])
    return trials


def _block_tile(trial: Trial) -> tuple[int, int]:
    """The block tile (BM, BN) of a trial of the coarse search."""
    config = trial.config
    assert isinstance(config, warp.WarpConfig)
    return config.BM, config.BN


def _coarse_rank(config: warp.WarpConfig) -> tuple[int, int, int, int]:
    """The first stage's pick of a block tile: the most outputs per thread (the most
    reuse of each value read from the slabs), then the shallowest slab, then the
    taller patch; of an asynchronous variant's, the default stage count."""
    stages = abs(config.stages - warp.DEFAULT_STAGES) if config.stages else 0
    return -(config.TM * config.TN), config.BK, -config.TM, stages


def _best(trials: list[Trial], key: Callable[[Trial], Key], count: int) -> list[Key]:
    """The ``count`` best distinct keys of the timed trials, fastest first."""
    chosen: list[Key] = []
    for trial in sorted((t for t in trials if t.tflops), key=_speed, reverse=True):
        if key(trial) not in chosen:
            chosen.append(key(trial))
        if len(chosen) == count:
            break
    return chosen


def tuned_variants(backend: Backend, op: str) -> list[str]:
    """The variants of ``op`` on ``backend`` whose parameters ``tune`` searches unasked:
    the block tiles (mm_warp), and a user's fixed-tile variants that declare several
    tiles (their family's search space); a shipped fixed-tile variant only when named
    (``searchable``)."""
    found = []
    for variant in backend.variants(op):
        spec = backend.variant_spec(variant, op)
        if spec.tuned or (spec.user and searchable(backend, variant, op)):
            found.append(variant)
    return found


def searchable(backend: Backend, variant: str, op: str) -> bool:
    """Whether ``tune`` can search ``variant``: its block tiles, or the several tiles its
    family declares."""
    spec = backend.variant_spec(variant, op)
    return spec.tuned or (bool(spec.kernel) and len(list(spec.space())) > 1)


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
    shape_class: str = ""  # warp.shape_class on the device

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
            shape_class = warp.shape_class(*output, backend.device.compute_units or 0)
            found += [TuneItem(variant, op, shape, shape_class) for variant in plan[op]]
    return found, notes
