"""The tuner's coarse-to-fine search (``tune_search.py``): replayed on the exhaustive
searches an H100 logged, it finds the same best on large and medium outputs and one
within 5% on small ones while timing about half of the candidates; on a made-up
landscape with one clearly best block tile it finds that tile's exact best; it times
each configuration once, in two batches, and only configurations of the space."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

import xbackend.tuning.searching as tune_search
from xbackend import families
from xbackend.families.variant import VariantSpec
from xbackend.launches import warp
from xbackend.launches.block_tiles import BlockTiles, candidates
from xbackend.launches.choices import Trial

SEED = 20261123
LOGS = Path(__file__).resolve().parent.parent / "docs" / "results" / "h100"
SPLITS = (1, 2, 3, 4, 6)  # as BlockTiles.space splits a small output
HEADER = re.compile(r"^\S.* \((?P<cls>small|medium|large)\) \w+ \w+: (?P<n>\d+) candidates")
CANDIDATE = re.compile(
    r"^\s+\[\d+/\d+\] (\d+)×(\d+)×(\d+) groups (\d+)×(\d+) patches (\d+)×(\d+)"
    r"(?: K/(\d+))?: ([\d.]+) TFLOP/s$"
)


@dataclasses.dataclass
class Logged:
    """One exhaustive search of a log: its title, shape class and measured speeds."""

    title: str
    shape_class: str
    expected: int
    speeds: dict[warp.WarpConfig, float] = dataclasses.field(default_factory=dict)


def _parse(path: Path) -> list[Logged]:
    searches: list[Logged] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        header, candidate = HEADER.match(line), CANDIDATE.match(line)
        if header:
            title = f"{path.name}: {line}"
            searches.append(Logged(title, header["cls"], int(header["n"])))
        elif candidate:
            *tiles, slices, tflops = candidate.groups()
            values = dict(zip(warp.TILE_NAMES, map(int, tiles), strict=True))
            config = warp.WarpConfig.from_dict({**values, "slices": int(slices or 1)})
            searches[-1].speeds[config] = float(tflops)
    return searches


def _logged() -> list[Logged]:
    searches = [s for name in ("tune_cuda.txt", "tune_opencl.txt") for s in _parse(LOGS / name)]
    assert len(searches) == 24
    for logged in searches:
        assert len(logged.speeds) == logged.expected, logged.title
    return searches


class Recorder:
    """A timer that answers each configuration with a given speed and keeps its batches."""

    def __init__(self, speeds: dict[warp.WarpConfig, float]):
        self.speeds = speeds
        self.batches: list[list[warp.WarpConfig]] = []

    def __call__(self, batch: Sequence[warp.WarpConfig]) -> list[Trial]:
        self.batches.append(list(batch))
        return [Trial(config, self.speeds[config], "ok") for config in batch]

    @property
    def timed(self) -> list[warp.WarpConfig]:
        return [config for batch in self.batches for config in batch]


def _best(trials: list[Trial]) -> float:
    return max(trial.tflops or 0.0 for trial in trials)


def test_coarse_search_replayed_on_the_h100_logs_finds_the_exhaustive_best_cheaply():
    """Guards the claim of tune_search's docstring: on every exhaustive search the H100
    logged, the coarse search's best is within 5% of the true best, equal to it on large
    and medium outputs, and it times at most 60% of the candidates over all searches;
    it never times a configuration twice nor one outside the space."""
    timed = total = 0
    for logged in _logged():
        timer = Recorder(logged.speeds)
        trials = tune_search.search(list(logged.speeds), timer, "coarse", BlockTiles())
        assert [trial.config for trial in trials] == timer.timed
        assert len(set(timer.timed)) == len(timer.timed), f"timed twice: {logged.title}"
        assert set(timer.timed) <= set(logged.speeds), logged.title
        ratio = _best(trials) / max(logged.speeds.values())
        assert ratio >= 0.95, f"{logged.title}: {ratio:.3f} of the exhaustive best"
        if logged.shape_class in ("large", "medium"):
            assert ratio == 1.0, f"{logged.title}: {ratio:.3f} of the exhaustive best"
        timed, total = timed + len(timer.timed), total + len(logged.speeds)
    assert total == 1680
    assert timed <= 0.6 * total, f"the coarse search timed {timed} of {total}"


def _shipped(variant: str) -> VariantSpec:
    return next(s for _, s in families.family("mm_warp").variants if s.name == variant)


def _small_space() -> list[warp.WarpConfig]:
    """The search space of a small output, as BlockTiles.space builds it from the
    shipped manifest (kernels/mm_warp/family.toml)."""
    return [c.with_slices(s) for c in candidates(_shipped("vec4")) for s in SPLITS]


BLOCK_TILES = sorted({(c.BM, c.BN) for c in candidates(_shipped("vec4"))})


def test_exhaustive_search_times_every_candidate_once_in_order():
    """Guards ``exhaustive``: one batch, the whole space, in the space's order."""
    rng = np.random.default_rng(SEED)
    space = _small_space()
    timer = Recorder({config: float(rng.uniform(1, 40)) for config in space})
    trials = tune_search.search(space, timer, "exhaustive")
    assert timer.batches == [space]
    assert [trial.config for trial in trials] == space


def test_an_unknown_search_is_refused():
    """Guards against a typo silently running some other search."""
    rng = np.random.default_rng(SEED)
    space = _small_space()
    timer = Recorder({config: float(rng.uniform(1, 40)) for config in space})
    with pytest.raises(ValueError, match="thorough"):
        tune_search.search(space, timer, "thorough")
    assert timer.batches == []


def _tile(config: warp.WarpConfig) -> tuple[int, int]:
    return config.BM, config.BN


def _landscape(best_tile: tuple[int, int], space: list[warp.WarpConfig]):
    """Seeded speeds where every configuration of ``best_tile`` (26-36 TFLOP/s) beats
    every other one (10-20 TFLOP/s)."""
    rng = np.random.default_rng([SEED, *best_tile])
    low = {True: 26.0, False: 10.0}
    return {config: float(rng.uniform(0, 10)) + low[_tile(config) == best_tile] for config in space}


@pytest.mark.parametrize("best_tile", BLOCK_TILES, ids=lambda tile: "×".join(map(str, tile)))
def test_coarse_search_finds_the_exact_best_of_a_clearly_best_block_tile(best_tile):
    """Guards the two stages: where one block tile's every configuration beats all
    others, its representative wins stage 1, and stage 2 times all of its configurations
    at every split, so the search returns the landscape's exact best."""
    space = _small_space()
    speeds = _landscape(best_tile, space)
    timer = Recorder(speeds)
    trials = tune_search.search(space, timer, "coarse", BlockTiles())
    best = max(trials, key=lambda trial: trial.tflops or 0.0)
    assert best.config == max(speeds, key=speeds.__getitem__)
    assert best.tflops == max(speeds.values())
    assert len(timer.timed) < len(space)


def test_each_stage_is_timed_as_one_batch():
    """Guards the batches the tuner builds together: stage 1 is one batch holding each
    block tile's largest patch at its shallowest slab, at every split; stage 2 is one
    batch holding the rest of the best COARSE_KEEP block tiles, at every split."""
    space = _small_space()
    speeds = _landscape((128, 64), space)
    timer = Recorder(speeds)
    tune_search.search(space, timer, "coarse", BlockTiles())
    first, second = timer.batches
    unsplit = {config for config in first if config.slices == 1}
    assert {_tile(config) for config in unsplit} == set(BLOCK_TILES) and len(unsplit) == 6
    assert set(first) == {c.with_slices(s) for c in unsplit for s in SPLITS}
    for chosen in unsplit:
        for other in (c for c in space if _tile(c) == _tile(chosen)):
            bigger = other.TM * other.TN > chosen.TM * chosen.TN
            shallower = other.TM * other.TN == chosen.TM * chosen.TN and other.BK < chosen.BK
            assert not (bigger or shallower), f"{chosen.label} picked over {other.label}"
    runner_up = _tile(max((c for c in first if _tile(c) != (128, 64)), key=speeds.__getitem__))
    kept = {(128, 64), runner_up}
    assert set(second) == {c for c in space if _tile(c) in kept} - set(first)
