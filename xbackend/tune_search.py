"""Which candidates ``xbackend tune`` times: every one, or coarse to fine.

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
from collections.abc import Callable, Sequence
from typing import TypeVar

from xbackend.backends import warp

SEARCHES = ("coarse", "exhaustive")
COARSE_KEEP = 2  # block tiles whose every configuration the second stage times
FINE_KEEP = 2  # configurations whose every K split the third stage times
Key = TypeVar("Key")
FINALIST_TIME_S = 3.0  # the finalists' race's time cap (tuning.race), per search


@dataclasses.dataclass
class Trial:
    config: warp.WarpConfig
    tflops: float | None  # None: not timed (wrong result or error)
    status: str  # "ok", "wrong", or the error


# Times a batch of configurations, one trial each, in their order.
Timer = Callable[[Sequence[warp.WarpConfig]], list[Trial]]


def search(space: Sequence[warp.WarpConfig], time: Timer, how: str = "coarse") -> list[Trial]:
    """The trials of a search of ``space``: all of it (``exhaustive``) or coarse to
    fine (``coarse``)."""
    if how not in SEARCHES:
        raise ValueError(f"search {how!r}: expected one of {', '.join(SEARCHES)}")
    if how == "exhaustive":
        return time(list(space))
    return _coarse_to_fine(space, time)


def _unsplit(config: warp.WarpConfig) -> warp.WarpConfig:
    return config.with_slices(1)


def _speed(trial: Trial) -> float:
    return trial.tflops or 0.0


def _coarse_to_fine(space: Sequence[warp.WarpConfig], time: Timer) -> list[Trial]:
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
        timed = {trial.config for trial in trials}
        fresh = [c.with_slices(s) for c in dict.fromkeys(batch) for s in splits[c]]
        trials.extend(time([config for config in fresh if config not in timed]))

    # 1. coarse: one per block tile, its largest patch at the shallowest slab.
    run([min(group, key=_coarse_rank) for group in tiles.values()])
    # 2. fine: the rest of the best block tiles.
    best_tiles = _best(trials, lambda trial: (trial.config.BM, trial.config.BN), COARSE_KEEP)
    run([config for tile in best_tiles for config in tiles[tile]])
    return trials


def _coarse_rank(config: warp.WarpConfig) -> tuple[int, int, int]:
    """The first stage's pick of a block tile: the most outputs per thread (the most
    reuse of each value read from the slabs), then the shallowest slab, then the
    taller patch."""
    return -(config.TM * config.TN), config.BK, -config.TM


def _best(trials: list[Trial], key: Callable[[Trial], Key], count: int) -> list[Key]:
    """The ``count`` best distinct keys of the timed trials, fastest first."""
    chosen: list[Key] = []
    for trial in sorted((t for t in trials if t.tflops), key=_speed, reverse=True):
        if key(trial) not in chosen:
            chosen.append(key(trial))
        if len(chosen) == count:
            break
    return chosen
