"""The tuner's race of finalists, against a made-up device whose configurations take
samples from seeded distributions with known medians: a 10% faster configuration is told
apart and wins by about 10%; two equal ones run to the time cap and the default is kept
as a tie; turns go round-robin; the race's numbers reach the cache and back, and entries
written before them still load."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import xbackend
from xbackend import tuning
from xbackend.cli import tune as tune_command
from xbackend.launches import warp
from xbackend.launches.choices import ChoiceRequest
from xbackend.operations import operation
from xbackend.problems import Shape

SEED = 20261122
SHAPE = Shape(1024, 1024, 1024)
FAST = warp.WarpConfig(128, 128, 8, 128, 128, 8, 8)
SLOW = warp.WarpConfig(64, 64, 8, 64, 64, 8, 4)
OTHER = warp.WarpConfig(128, 64, 16, 128, 64, 8, 4)
TURN_OVERHEAD_S = 2e-3  # a turn's compile, upload and untimed runs on the made-up device


class MadeUpDevice:
    """Samples of each configuration drawn from a lognormal around its true median
    (2% spread, a seeded generator per configuration); its clock advances by what it
    ran, so that a time cap is reached without waiting for it."""

    def __init__(self, medians_s: dict[warp.WarpConfig, float], spread: float = 0.02):
        self.medians_s = medians_s
        self.spread = spread
        self.now_s = 0.0
        self.turns: list[tuple[warp.WarpConfig, int]] = []
        self.rngs = {
            config: np.random.default_rng([SEED, number]) for number, config in enumerate(medians_s)
        }

    def sample(self, config: warp.WarpConfig, count: int) -> list[float]:
        self.turns.append((config, count))
        draws = self.rngs[config].lognormal(0.0, self.spread, count)
        samples = [float(value) for value in self.medians_s[config] * draws]
        self.now_s += sum(samples) + TURN_OVERHEAD_S
        return samples

    def clock(self) -> float:
        return self.now_s


def _race(device: MadeUpDevice, racers: list[tuning.Finalist], cap_s: float) -> tuning.Race:
    return tuning.race(racers, device.sample, cap_s, clock=device.clock)


def test_a_ten_percent_faster_finalist_is_told_apart_and_wins_by_ten_percent():
    device = MadeUpDevice({SLOW: 1.1e-3, FAST: 1.0e-3})
    racers = [tuning.Finalist(SLOW, default=True), tuning.Finalist(FAST)]
    outcome = _race(device, racers, cap_s=5.0)
    assert outcome.winner.config == FAST and not outcome.tie and outcome.separated
    assert outcome.runner_up is not None and outcome.runner_up.config == SLOW
    assert outcome.margin == pytest.approx(0.10, abs=0.015)
    low, high = outcome.winner.interval_s
    assert low <= 1.0e-3 <= high and high < outcome.runner_up.interval_s[0]
    assert outcome.seconds < 1.0  # told apart long before the cap
    assert len(outcome.winner.samples_s) >= tuning.MIN_RACE_SAMPLES


def test_equal_finalists_run_to_the_cap_and_the_default_is_kept_as_a_tie():
    device = MadeUpDevice({FAST: 1.0e-3, SLOW: 1.0e-3})
    racers = [tuning.Finalist(FAST), tuning.Finalist(SLOW, default=True)]
    outcome = _race(device, racers, cap_s=0.5)
    assert outcome.tie and not outcome.separated
    assert outcome.winner.config == SLOW and outcome.winner.default
    assert outcome.seconds >= 0.5
    assert outcome.margin is not None and abs(outcome.margin) < 0.01
    counts = {len(finalist.samples_s) for finalist in racers}
    assert len(counts) == 1 and counts.pop() == outcome.rounds * tuning.TURN_SAMPLES


def test_a_faster_best_that_the_default_cannot_be_told_from_is_still_a_tie():
    """0.5% apart with 2% noise in 0.2 s: too close to call, so the default stays."""
    device = MadeUpDevice({FAST: 0.995e-3, SLOW: 1.0e-3})
    racers = [tuning.Finalist(FAST), tuning.Finalist(SLOW, default=True)]
    outcome = _race(device, racers, cap_s=0.2)
    assert outcome.tie and outcome.winner.config == SLOW


def test_turns_go_round_robin_and_a_beaten_finalist_drops_out():
    device = MadeUpDevice({FAST: 1.0e-3, OTHER: 1.0e-3, SLOW: 1.3e-3})
    racers = [tuning.Finalist(FAST), tuning.Finalist(OTHER), tuning.Finalist(SLOW, default=True)]
    outcome = _race(device, racers, cap_s=0.3)
    configs = [config for config, _ in device.turns]
    assert {count for _, count in device.turns} == {tuning.TURN_SAMPLES}
    rounds_with_slow = configs.count(SLOW)
    assert 2 <= rounds_with_slow < outcome.rounds  # it raced, then dropped out
    head = 3 * rounds_with_slow
    assert configs[:head] == [FAST, OTHER, SLOW] * rounds_with_slow
    assert configs[head:] == [FAST, OTHER] * (outcome.rounds - rounds_with_slow)
    assert not outcome.tie and outcome.winner.config in (FAST, OTHER)
    assert not outcome.separated  # FAST and OTHER are the same speed


def _result(tflops: list[float], default_tflops: float, default_config=SLOW) -> tuning.TuneResult:
    configs = [FAST, OTHER, *(FAST.with_slices(s) for s in range(2, 2 + len(tflops)))]
    trials = [tuning.Trial(c, t, "ok") for c, t in zip(configs, tflops, strict=False)]
    default = tuning.Trial(default_config, default_tflops, "ok")
    return tuning.TuneResult("warp", "mm", SHAPE, "large", trials, default, 1.0, default)


def test_the_finalists_are_the_best_few_and_the_default():
    result = _result([10.0, 9.9, 9.8, 9.7, 6.0], 5.0)
    racers = tuning.finalists(result)
    assert len(racers) == tuning.FINALISTS + 1 and racers[-1].config == SLOW
    assert [r.default for r in racers] == [False] * tuning.FINALISTS + [True]
    # The best two always; the default marked where it is one of them.
    result = _result([10.0, 6.0, 5.0], 6.0, default_config=OTHER)
    racers = tuning.finalists(result)
    assert [(r.config, r.default) for r in racers] == [(FAST, False), (OTHER, True)]


def _raced_result(medians_s: dict[warp.WarpConfig, float]) -> tuning.TuneResult:
    device = MadeUpDevice(medians_s)
    result = _result([1.0, 0.9], 0.9)
    racers = [tuning.Finalist(FAST), tuning.Finalist(SLOW, default=True)]
    result.race = _race(device, racers, cap_s=0.5)
    return result


def _request(build: dict[str, str]) -> ChoiceRequest:
    return ChoiceRequest("cuda", "GPU", "warp", operation("mm"), "float32", "large", None, build)


def test_a_raced_choice_round_trips_through_the_cache(tmp_path):
    result = _raced_result({FAST: 1.0e-3, SLOW: 1.1e-3})
    build = {"driver": "555", "xbackend": xbackend.__version__}
    entry = tuning.cache_entry(result, build)
    path = tmp_path / "tuned.json"
    tuning.update_entries({"cuda|GPU|warp|mm|float32|large": entry}, path)
    (loaded,) = tuning.load_entries(path).values()
    assert loaded == json.loads(json.dumps(entry))
    assert loaded["params"] == FAST.to_dict() and loaded["tie"] is False
    assert loaded["margin"] == pytest.approx(0.10, abs=0.015)
    low, high = loaded["interval_s"]
    assert low <= 1.0e-3 <= high < loaded["runner_up_interval_s"][0]
    assert loaded["tflops"] == pytest.approx(SHAPE.flops / 1.0e-3 / 1e12, rel=0.01)
    assert loaded["race_samples"] >= tuning.MIN_RACE_SAMPLES
    entries = tuning.load_entries(path)
    assert tuning.choose(entries, _request({"driver": "555"}), path) == FAST


def test_a_tie_entry_holds_the_default_and_gives_the_size_aware_default(tmp_path):
    result = _raced_result({FAST: 1.0e-3, SLOW: 1.0e-3})
    assert result.race is not None and result.race.tie
    entry = tuning.cache_entry(result, {"driver": "555", "xbackend": xbackend.__version__})
    assert entry["tie"] is True and entry["params"] == SLOW.to_dict()
    path = tmp_path / "tuned.json"
    tuning.save_entries({"cuda|GPU|warp|mm|float32|large": entry}, path)
    entries = tuning.load_entries(path)
    assert len(entries) == 1
    assert tuning.choose(entries, _request({"driver": "555"}), path) is None
    # The tie holds for the neighbouring class too: it does not fall through to another.
    medium = ChoiceRequest(
        "cuda", "GPU", "warp", operation("mm"), "float32", "medium", None, {"driver": "555"}
    )
    assert tuning.choose(entries, medium, path) is None


def test_a_format_3_entry_without_the_race_fields_still_loads(tmp_path):
    old = {"params": FAST.to_dict(), "blocks": 64, "tflops": 40.1, "shape": "4096×4096 · …"}
    path = tmp_path / "tuned.json"
    path.write_text(json.dumps({"format": 3, "entries": {"cuda|GPU|warp|mm|float32|large": old}}))
    entries = tuning.load_entries(path)
    assert entries == {"cuda|GPU|warp|mm|float32|large": old}
    assert tuning.choose(entries, _request({}), path) == FAST


@pytest.mark.parametrize(
    "fields",
    [
        {"margin": "big"},
        {"tie": "yes"},
        {"separated": 1},
        {"interval_s": [2e-3, 1e-3]},
        {"interval_s": [1e-3]},
        {"runner_up_interval_s": "narrow"},
        {"race_samples": -1},
        {"race_seconds": True},
    ],
    ids=str,
)
def test_malformed_race_fields_are_refused_with_a_warning(tmp_path, fields):
    entry = {"params": FAST.to_dict(), "blocks": 64, **fields}
    path = tmp_path / "tuned.json"
    path.write_text(json.dumps({"format": 3, "entries": {"bad": entry}}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert tuning.load_entries(path) == {}
    (name,) = fields
    assert any(name in str(warning.message) for warning in caught)


def test_tune_prints_the_margin_and_interval_of_each_choice(capsys):
    separated = _raced_result({FAST: 1.0e-3, SLOW: 1.1e-3})
    tie = _raced_result({FAST: 1.0e-3, SLOW: 1.0e-3})
    tune_command._print([separated, tie])
    lines = capsys.readouterr().out.splitlines()
    (won,) = [line for line in lines if FAST.label in line]
    (kept,) = [line for line in lines if SLOW.label in line]
    assert "+10." in won or "+9." in won or "+11." in won, won
    gflops = SHAPE.flops / 1.0e-3 / 1e9
    low, high = next(token for token in won.split() if "–" in token).split("–")
    assert float(low) <= gflops <= float(high), won
    assert "a tie: the default kept" in kept and "a tie" not in won


def _tune(backend, path, lines: list[str], finalist_time_s: float) -> list[tuning.TuneResult]:
    return tuning.tune(
        backend, ["vec4_db"], [Shape(40, 300, 36)], np.dtype("float32"), samples=2,
        finalist_time_s=finalist_time_s, progress=lines.append, path=path,
    )  # fmt: skip


@pytest.mark.slow
def test_a_real_tune_races_and_caches_its_margin(tmp_path, monkeypatch):
    """On the OpenCL device (the CPU here), small: the race runs on the device and its
    numbers reach the cache; ``finalist_time_s=0`` is the search alone."""
    try:
        backend = xbackend.get_backend("opencl")
    except xbackend.BackendUnavailable as error:
        pytest.skip(f"opencl unavailable: {error.reason}")
    path = tmp_path / "tuned.json"
    monkeypatch.setenv(tuning.CACHE_ENV, str(path))
    lines: list[str] = []
    with backend:
        (result,) = _tune(backend, path, lines, finalist_time_s=0.5)
        assert result.race is not None and len(result.race.finalists) >= 2
        assert any(finalist.default for finalist in result.race.finalists)
        assert any(line.startswith("  race of ") for line in lines)
        (entry,) = tuning.load_entries(path).values()
        low, high = entry["interval_s"]
        assert 0 < low <= high and isinstance(entry["margin"], float)
        assert entry["race_samples"] >= tuning.TURN_SAMPLES
        rate = Shape(40, 300, 36).flops / np.array([high, low]) / 1e12
        assert rate[0] * 0.99 <= entry["tflops"] <= rate[1] * 1.01
        if entry["tie"]:
            assert entry["params"] == result.race.winner.config.to_dict()
            assert result.race.winner.default
        (quick,) = _tune(backend, path, lines, finalist_time_s=0)
        assert quick.race is None
        (entry,) = tuning.load_entries(path).values()
        assert "margin" not in entry and "tie" not in entry
