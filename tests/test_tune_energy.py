"""``xbackend tune --objective energy``: candidates ranked by joules per product, the
fewest winning even where another is faster; the objective recorded with the cache entry
(older entries without one read as tuned for time); a device without an energy counter
refused before anything runs, by the API and by the command.

The device is a stand-in: the OpenCL backend's variants, candidates and checks, with a
``measure`` whose configurations take seeded times and joules (TIMES, JOULES) and a
monitor whose energy counter answers, where a test gives it one."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import xbackend
from xbackend import tuning
from xbackend.cli import main
from xbackend.errors import XBackendError
from xbackend.launches.specs import Measurement
from xbackend.measuring.monitor import NullMonitor
from xbackend.problems import Shape
from xbackend.tuning.objective import objective_of

SEED = 20261128
SHAPE = Shape(40, 300, 36)
# T=16 is the fastest (and the device's default tile); T=8 takes the fewest joules.
TIMES = {8: 2.0e-3, 16: 1.0e-3, 32: 1.5e-3}
JOULES = {8: 0.02, 16: 0.08, 32: 0.05}
SPREAD = 0.02


class _Counter(NullMonitor):
    """An energy counter that answers (its readings are not used: the stand-in's measure
    gives each configuration's joules)."""

    def energy_mj(self):
        return 1.0e6


class _StandIn:
    """The measure of a device whose configurations take the times and joules above."""

    def __init__(self, backend):
        self.backend = backend
        self.rng = np.random.default_rng(SEED)
        self.windows: list[float] = []  # each measurement's energy window

    def measure(self, A, B, variant="tiled", tile=None, *, op="mm", params=None,
                sampling=None, warmup=None, samples=None, min_samples=None,
                verify=None):  # fmt: skip
        tile = (params or {}).get("TILE") or self.backend.default_tile(variant, op, A.dtype)
        result = (A.astype(np.float64) @ B.astype(np.float64)).astype(A.dtype)
        kernel_s = [float(t) for t in TIMES[tile] * self.rng.lognormal(0, SPREAD, samples or 1)]
        window = sampling.energy_s if sampling is not None else 0.0
        self.windows.append(window)
        state = None
        if window > 0:
            joules = JOULES[tile] * float(self.rng.lognormal(0, SPREAD))
            state = {"energy": {"joules_per_product": joules, "watts": 100.0,
                                "window_s": window, "products": 10}}  # fmt: skip
        return Measurement(result, result, kernel_s, kernel_s, tile, state=state)


@pytest.fixture
def opencl(tmp_path, monkeypatch):
    monkeypatch.setenv(tuning.CACHE_ENV, str(tmp_path / "tuned.json"))
    monkeypatch.setenv("XBACKEND_TUNING_DB", "off")
    try:
        backend = xbackend.get_backend("opencl")
    except xbackend.BackendUnavailable as error:
        pytest.skip(f"opencl unavailable: {error.reason}")
    with backend:
        yield backend


def _standing_in(backend, monkeypatch, counter: bool) -> _StandIn:
    stand_in = _StandIn(backend)
    monkeypatch.setattr(backend, "measure", stand_in.measure)
    monkeypatch.setattr(backend, "monitor", lambda: _Counter() if counter else NullMonitor())
    return stand_in


def _tune(backend, path, objective, lines):
    return tuning.tune(
        backend, ["tiled"], [SHAPE], np.dtype("float32"), samples=3, finalist_time_s=5.0,
        progress=lines.append, path=path, objective=objective,
    )  # fmt: skip


def test_energy_picks_the_fewest_joules_though_another_is_faster(opencl, tmp_path, monkeypatch):
    stand_in = _standing_in(opencl, monkeypatch, counter=True)
    path = tmp_path / "tuned.json"
    lines: list[str] = []
    (result,) = _tune(opencl, path, tuning.Objective("energy", 0.25), lines)
    assert set(stand_in.windows) == {0.25}  # every measurement read a window of energy
    fastest = min(result.trials, key=lambda trial: TIMES[trial.config.to_dict()["TILE"]])
    assert fastest.config.to_dict() == {"TILE": 16}
    chosen = result.chosen
    assert chosen is not None and chosen.config.to_dict() == {"TILE": 8}
    assert result.race is not None and not result.race.tie
    assert chosen.joules == pytest.approx(JOULES[8], rel=5 * SPREAD)
    (entry,) = tuning.load_entries(path).values()
    assert objective_of(entry) == "energy" and entry["params"] == {"TILE": 8}
    low, high = entry["joules_interval"]
    assert low <= entry["joules_per_product"] <= high
    assert entry["joules_per_product"] == pytest.approx(JOULES[8], rel=5 * SPREAD)
    assert "interval_s" not in entry  # the race's intervals are of joules, named so
    assert entry["tflops"] == pytest.approx(SHAPE.flops / TIMES[8] / 1e12, rel=5 * SPREAD)
    assert any("J a product" in line for line in lines)


def test_time_on_the_same_device_picks_the_fastest_and_replaces_the_energy_choice(
    opencl, tmp_path, monkeypatch
):
    stand_in = _standing_in(opencl, monkeypatch, counter=True)
    path = tmp_path / "tuned.json"
    lines: list[str] = []
    _tune(opencl, path, tuning.Objective("energy", 0.25), lines)
    (result,) = _tune(opencl, path, None, lines)
    assert stand_in.windows[-1] == 0.0  # a time tune reads no energy
    assert result.chosen is not None and result.chosen.config.to_dict() == {"TILE": 16}
    (entry,) = tuning.load_entries(path).values()
    assert entry["objective"] == "time" and "joules_per_product" not in entry
    assert any("replaces the choice tuned for energy" in line for line in lines)


def test_without_an_energy_counter_nothing_runs(opencl, tmp_path, monkeypatch):
    stand_in = _standing_in(opencl, monkeypatch, counter=False)
    path = tmp_path / "tuned.json"
    lines: list[str] = []
    with pytest.raises(XBackendError, match="no energy counter"):
        _tune(opencl, path, tuning.Objective("energy"), lines)
    assert stand_in.windows == [] and lines == [] and not path.exists()


def test_the_command_refuses_an_energy_tune_without_a_counter(tmp_path, monkeypatch, capsys):
    """An OpenCL CPU device has no energy counter: refused before tuning starts."""
    path = tmp_path / "tuned.json"
    monkeypatch.setenv(tuning.CACHE_ENV, str(path))
    try:
        xbackend.get_backend("opencl", "cpu").close()
    except (xbackend.BackendUnavailable, xbackend.XBackendError) as error:
        pytest.skip(f"no OpenCL CPU device: {str(error).splitlines()[0]}")
    code = main(["tune", "--backends", "opencl:cpu", "--objective", "energy", "--variants",
                 "vec4_db", "--sizes", "40x300x36", "--op", "mm"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 2 and "has no energy counter here" in captured.err
    assert "tuning opencl" not in captured.out and not path.exists()


def test_energy_options_are_checked(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(tuning.CACHE_ENV, str(tmp_path / "tuned.json"))
    assert main(["tune", "--backends", "opencl", "--energy", "1"]) == 2
    assert "--energy SECONDS is the window of --objective energy" in capsys.readouterr().err
    code = main(["tune", "--backends", "cuda", "--objective", "energy", "--workers", "2"])
    assert code == 2 and "not on a cluster" in capsys.readouterr().err
    for bad in (["--energy", "0"], ["--objective", "speed"]):
        with pytest.raises(SystemExit) as refused:
            main(["tune", "--backends", "opencl", *bad])
        assert refused.value.code == 2


def _write(path, entries):
    path.write_text(json.dumps({"format": tuning.FORMAT, "entries": entries}))


KEY = "opencl|AMD EPYC|tiled|mm|float32|small"


def test_older_entries_read_as_time_and_show_says_which(tmp_path, monkeypatch, capsys):
    path = tmp_path / "tuned.json"
    monkeypatch.setenv(tuning.CACHE_ENV, str(path))
    monkeypatch.setenv("XBACKEND_TUNING_DB", "off")
    older = {"params": {"TILE": 16}, "blocks": 9, "tflops": 0.013, "shape": str(SHAPE)}
    energy = {**older, "params": {"TILE": 8}, "objective": "energy",
              "joules_per_product": 0.0213, "joules_interval": [0.0201, 0.0225]}  # fmt: skip
    _write(path, {KEY: older, KEY.replace("small", "large"): energy})
    entries = tuning.load_entries(path)
    assert [objective_of(entry) for entry in entries.values()] == ["time", "energy"]
    described = tuning.CachedChoices(path, database=False).describe("opencl", "AMD EPYC")
    assert described["tune_cache_entries"] == 2 and described["tune_cache_energy_entries"] == 1
    assert main(["tune", "--show"]) == 0
    out = capsys.readouterr().out
    (old_line,) = [line for line in out.splitlines() if "|small:" in line]
    (energy_line,) = [line for line in out.splitlines() if "|large:" in line]
    assert "energy" not in old_line and "tuned for energy: 0.0213 J a product" in energy_line


@pytest.mark.parametrize(
    "fields",
    [{"objective": "speed"}, {"objective": "energy", "joules_per_product": -1.0},
     {"objective": "energy", "joules_interval": [0.3, 0.2]}],
)  # fmt: skip
def test_malformed_objective_fields_are_refused_with_a_warning(tmp_path, fields):
    path = tmp_path / "tuned.json"
    _write(path, {KEY: {"params": {"TILE": 16}, "blocks": 9, **fields}})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert tuning.load_entries(path) == {}
    name = list(fields)[-1]  # the field at fault
    assert any(name in str(warning.message) for warning in caught)
