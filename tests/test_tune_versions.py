"""Issue 54, item 10: the tune cache is edited by hand and shared between versions, so a
write keeps every part of it this version does not understand, and a file this version
cannot read at all (another format, no JSON) is refused for writing with the way round,
never replaced by one entry alone."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xbackend.tuning.cache as tune_cache
from xbackend import tuning
from xbackend.cli import main
from xbackend.launches import warp

SEED = 5410
WAY_ROUND = "point XBACKEND_TUNE_CACHE at a file of its own for this version, or move it aside"


@pytest.fixture(autouse=True)
def _fresh(monkeypatch, tmp_path):
    monkeypatch.setattr(tune_cache, "_warned", set())
    monkeypatch.setenv(tune_cache.CACHE_ENV, str(tmp_path / "tuned.json"))


def _entry(rng: np.random.Generator) -> dict[str, Any]:
    config = warp.default_config("block", int(rng.choice([64, 128])))
    return {"params": config.to_dict(), "blocks": int(rng.integers(1, 4096)),
            "tflops": float(rng.uniform(0.1, 50)), "shape": "1000x3001x1000"}  # fmt: skip


def _key(rng: np.random.Generator) -> str:
    return tune_cache.entry_key("opencl", f"GPU {rng.integers(1 << 30)}", "warp", "mm",
                                "float32", "large")  # fmt: skip


def _caught(call: Any) -> tuple[Any, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, [str(w.message) for w in caught]


def test_a_write_keeps_entries_and_keys_it_does_not_understand(tmp_path):
    rng = np.random.default_rng(SEED)
    path = tmp_path / "tuned.json"
    kept_key, new_key = _key(rng), _key(rng)
    written: dict[str, Any] = {
        "format": tuning.FORMAT,
        "comment": f"tuned by hand on {rng.integers(1, 28)} November",  # a key of the user's
        "entries": {
            kept_key: {**_entry(rng), "note": "a field of a newer version"},
            "nobar": _entry(rng),  # a key this version cannot read
            _key(rng): {**_entry(rng), "params": {"BM": "fast"}},  # parameters it refuses
        },
    }
    path.write_text(json.dumps(written), encoding="utf-8")
    change = _entry(rng)
    _caught(lambda: tuning.update_entries({new_key: change}, path))
    after = json.loads(path.read_text(encoding="utf-8"))
    assert after == {**written, "entries": {**written["entries"], new_key: change}}


FOREIGN = {
    "an older format": {"format": 2, "entries": {"cuda|GPU|warp|mm|float32|large": {}}},
    "a newer format": {"format": 99, "entries": {}, "devices": ["A", "B"]},
    "no format": {"entries": {}},
    "entries not an object": {"format": tuning.FORMAT, "entries": ["a", "list"]},
    "no object": ["format", 3],
}


def _foreign_text(kind: str, rng: np.random.Generator) -> str:
    if kind == "not JSON":
        return '{"format": 3, "entries": {' + f'"{_key(rng)}": ' + "{,}"  # a hand edit's typo
    return json.dumps(FOREIGN[kind])


@pytest.mark.parametrize("kind", [*FOREIGN, "not JSON"])
def test_a_file_this_version_cannot_read_is_never_written_over(tmp_path, kind):
    rng = np.random.default_rng(SEED)
    path = tmp_path / "tuned.json"
    text = _foreign_text(kind, rng)
    path.write_text(text, encoding="utf-8")
    with pytest.raises(tuning.ForeignCache) as refused:
        tuning.check_writable(path)
    assert str(path) in str(refused.value) and WAY_ROUND in str(refused.value)
    with pytest.raises(tuning.ForeignCache) as refused:
        _caught(lambda: tuning.update_entries({_key(rng): _entry(rng)}, path))
    assert WAY_ROUND in str(refused.value)
    assert path.read_text(encoding="utf-8") == text


def test_the_refusal_names_the_formats():
    path = Path(tune_cache.cache_path())
    path.write_text(json.dumps(FOREIGN["an older format"]), encoding="utf-8")
    with pytest.raises(tuning.ForeignCache) as refused:
        tuning.check_writable()
    message = str(refused.value)
    assert message == (
        f"XBACKEND_TUNE_CACHE={path}: it holds format 2 (another xbackend version's; this one "
        f"reads and writes format {tuning.FORMAT}); a tune would write over its entries: "
        f"{WAY_ROUND}"
    )


def test_a_file_of_another_format_reads_as_empty_with_a_warning(tmp_path):
    path = tmp_path / "tuned.json"
    path.write_text(json.dumps(FOREIGN["a newer format"]), encoding="utf-8")
    entries, messages = _caught(lambda: tuning.load_entries(path))
    assert entries == {}
    assert len(messages) == 1 and "format 99" in messages[0] and str(path) in messages[0]


def test_an_empty_file_is_an_empty_cache_to_write(tmp_path):
    rng = np.random.default_rng(SEED)
    path = tmp_path / "tuned.json"
    path.write_text("\n", encoding="utf-8")
    key, entry = _key(rng), _entry(rng)
    tuning.check_writable(path)
    tuning.update_entries({key: entry}, path)
    assert json.loads(path.read_text()) == {"format": tuning.FORMAT, "entries": {key: entry}}


def test_tune_refuses_another_versions_cache_before_it_searches(capsys):
    path = Path(tune_cache.cache_path())
    text = json.dumps(FOREIGN["an older format"])
    path.write_text(text, encoding="utf-8")
    assert main(["tune", "--backends", "cpu"]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"xbackend: error: XBACKEND_TUNE_CACHE={path}: it holds format 2")
    assert WAY_ROUND in error and "Traceback" not in error
    assert path.read_text(encoding="utf-8") == text
