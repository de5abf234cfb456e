"""The tune cache (tuned.json) against hostile contents: a bad entry is ignored with a
warning naming the file, and the variant's default is used."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest

from xbackend import tuning
from xbackend.backends import warp
from xbackend.problems import Reference, Shape, check, make_operands

SEED = 21
GOOD = warp.default_config("block", 128).to_dict()
HUGE = float("inf")  # written as 1e400, which Python's json reads as inf


def _entry(**params: object) -> dict[str, object]:
    return {"params": {**GOOD, **params}, "blocks": 512, "tflops": 1.5, "shape": "a shape"}


# Each of these entries once crashed a lookup, a launch or `tune --show`.
BAD_ENTRIES: dict[str, object] = {
    "zero": _entry(BM=0),
    "negative": _entry(BN=-128),
    "not dividing": _entry(BM=96),  # 96 is no multiple of WM = 128
    "not a number": _entry(BK="abc"),
    "a fraction": _entry(TM=8.5),
    "a bool": _entry(TN=True),
    "unknown name": _entry(XX=4),
    "no slices": _entry(slices=0),
    "too many slices": _entry(slices=10**6),
    "params not a dict": {"params": [128, 128], "blocks": 1},
    "no params": {"blocks": 1},
    "not a dict": "fast",
    "negative blocks": {**_entry(), "blocks": -1},
    "blocks not a number": {**_entry(), "blocks": "many"},
    "tflops not a number": {**_entry(), "tflops": "fast"},
    "shape not a string": {**_entry(), "shape": [1, 2, 3]},
    "huge": _entry(BM=HUGE),
    "huge blocks": {**_entry(), "blocks": HUGE},
}


def _write(path: Path, entries: dict[str, object]) -> Path:
    text = json.dumps({"format": tuning.FORMAT, "entries": entries})
    path.write_text(text.replace("Infinity", "1e400"), encoding="utf-8")
    return path


def _warnings_of(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, [str(w.message) for w in caught]


def test_an_empty_or_relative_xdg_cache_home_means_unset(tmp_path, monkeypatch):
    monkeypatch.delenv(tuning.CACHE_ENV, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    for value in ("", "relative/cache"):
        monkeypatch.setenv("XDG_CACHE_HOME", value)
        assert tuning.cache_path() == tmp_path / ".cache" / "xbackend" / "tuned.json"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert tuning.cache_path() == tmp_path / "cache" / "xbackend" / "tuned.json"


def test_malformed_entries_are_dropped_at_load_with_one_warning_naming_the_file(tmp_path):
    path = _write(tmp_path / "tuned.json", {"good": _entry(), **BAD_ENTRIES})
    entries, messages = _warnings_of(lambda: tuning.load_entries(path))
    assert list(entries) == ["good"]
    assert len(messages) == 1 and str(path) in messages[0], messages
    for name in BAD_ENTRIES:
        assert name in messages[0]
    entries, messages = _warnings_of(lambda: tuning.load_entries(path))
    assert list(entries) == ["good"] and messages == []  # once per file and process


def test_a_file_that_is_not_json_is_an_empty_cache_with_a_warning(tmp_path):
    path = tmp_path / "tuned.json"
    path.write_text('{"format": 2, "entr', encoding="utf-8")
    entries, messages = _warnings_of(lambda: tuning.load_entries(path))
    assert entries == {} and len(messages) == 1 and str(path) in messages[0]


def test_tune_show_survives_malformed_entries(tmp_path):
    path = _write(tmp_path / "tuned.json", {"good": _entry(), **BAD_ENTRIES})
    env = {**os.environ, tuning.CACHE_ENV: str(path)}
    done = subprocess.run(
        [sys.executable, "-m", "xbackend", "tune", "--backend", "cpu", "--show"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert ": 1 entries" in done.stdout and "good" in done.stdout
    assert str(path) in done.stderr


def _tuned_backend(backend):
    tuned = [v for v in backend.variants("mm") if backend.variant_spec(v).tuned]
    if not tuned:
        pytest.skip(f"{backend.name} has no tuned variants")
    return tuned[0]


@pytest.mark.parametrize(
    "params",
    [
        {"BM": 96},  # not dividing: refused by WarpConfig.problem
        {"BM": 0},
        {"BM": HUGE},
        # Legal, but its slabs exceed any device's local memory: refused by tile_problem.
        {"BM": 512, "BN": 512, "BK": 64, "WM": 512, "WN": 512, "TM": 8, "TN": 8},
    ],
    ids=["not dividing", "zero", "huge", "too large for the device"],
)
def test_a_bad_entry_for_this_device_falls_back_to_the_default(
    backend, tmp_path, monkeypatch, params
):
    variant = _tuned_backend(backend)
    shape = Shape(70, 33, 65)
    A, B = make_operands(shape, SEED)
    units = backend.device.compute_units or 0
    key = "|".join(
        (backend.name, backend.device.name, variant, "mm", "float32",
         warp.shape_class(shape.M, shape.N, units))
    )  # fmt: skip
    path = _write(tmp_path / "tuned.json", {key: _entry(**params)})
    monkeypatch.setenv(tuning.CACHE_ENV, str(path))
    C, messages = _warnings_of(lambda: backend.matmul(A, B, variant=variant))
    assert check(C, Reference.of(A, B)).equal
    assert any(str(path) in message for message in messages), messages


def test_saves_from_many_threads_leave_a_whole_file(tmp_path):
    path = tmp_path / "tuned.json"
    failures: list[BaseException] = []

    def save(number: int) -> None:
        try:
            for round_ in range(40):
                tuning.save_entries({f"thread {number} round {round_}": _entry()}, path)
        except BaseException as error:  # reported by the assertion below
            failures.append(error)

    threads = [threading.Thread(target=save, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert len(json.loads(path.read_text())["entries"]) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["tuned.json"]  # no temporary left


def test_finite_random_products_through_a_good_entry(backend, tmp_path, monkeypatch):
    """The validation keeps what the tuner writes: a good entry is used as it is."""
    variant = _tuned_backend(backend)
    config = warp.WarpConfig(64, 64, 8, 64, 64, 8, 4)
    if backend.tile_problem(variant, 64, 4, "mm", config):
        pytest.skip("this device cannot run the entry")
    shape = Shape(66, 40, 70)
    A, B = make_operands(shape, SEED)
    units = backend.device.compute_units or 0
    key = "|".join(
        (backend.name, backend.device.name, variant, "mm", "float32",
         warp.shape_class(shape.M, shape.N, units))
    )  # fmt: skip
    path = _write(tmp_path / "tuned.json", {key: {"params": config.to_dict(), "blocks": 2}})
    monkeypatch.setenv(tuning.CACHE_ENV, str(path))
    measured, messages = _warnings_of(lambda: backend.measure(A, B, variant, warmup=0, samples=0))
    assert messages == [] and measured.params == config.to_dict()
    assert check(measured.result, Reference.of(A, B)).equal
    assert np.isfinite(measured.result).all()
