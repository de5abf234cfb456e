"""The shipped tuning database (``xbackend/tuning/tuning_db.json``, ``tuning_db.py``): it loads
cleanly and matches the kernel files it was measured with; a user's tune cache wins
over it, a tie included, while it holds on any driver and is ignored once its kernel
changes; ``XBACKEND_TUNING_DB=off`` hides it; and ``scripts/tuning_db.py`` writes its
entries in the form it is matched on."""

from __future__ import annotations

import importlib.util
import json
import re
import warnings
from pathlib import Path
from typing import Any

import pytest

import xbackend
import xbackend.tuning.cache as tune_cache
import xbackend.tuning.database as tuning_db
from xbackend.launches import warp
from xbackend.launches.choices import ChoiceRequest
from xbackend.launches.kernels import SUM_BLOCK, source_digest
from xbackend.operations import operation
from xbackend.tuning.cache import CachedChoices, TuneCacheWarning

ROOT = Path(__file__).resolve().parent.parent
ISO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ?$")
KEY = tune_cache.entry_key("cuda", "GPU", "vec4", "mm", "float32", "large")
DB_CONFIG = warp.WarpConfig(128, 256, 8, 128, 256, 16, 8)
CACHE_CONFIG = warp.WarpConfig(64, 128, 16, 64, 128, 8, 8)
KERNEL = "0123456789abcdef"


def _kernel_digest(backend: str) -> str:
    """The digest the backend's kernel_build gives mm_warp today (no extra options)."""
    fixed = (f"-DPAD={warp.PAD}", f"-DSUM_BLOCK={SUM_BLOCK}")
    return source_digest("mm_warp", {"cuda": "cuda", "opencl": "opencl"}[backend], fixed)


def _shipped_entries() -> dict[str, dict[str, Any]]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return tune_cache.load_entries(tuning_db.SHIPPED)


def test_the_shipped_database_loads_without_warnings(monkeypatch):
    """Guards the file we ship: every entry well-formed (none dropped with a warning),
    and each says how and when it was measured and is matched on its kernel alone."""
    monkeypatch.setattr(tune_cache, "_warned", set())  # warn again if warned before
    entries = _shipped_entries()
    assert entries, f"{tuning_db.SHIPPED} holds no entries of format {tune_cache.FORMAT}"
    for key, entry in entries.items():
        assert isinstance(entry.get("how"), str) and entry["how"].strip(), key
        assert isinstance(entry.get("tuned_at"), str), key
        assert ISO_TIME.match(entry["tuned_at"]), f"{key}: tuned_at {entry['tuned_at']!r}"
        assert isinstance(entry.get("shape"), str) and entry["shape"], key
        assert list(entry["build"]) == ["kernel"], f"{key}: build {entry['build']}"


def test_every_shipped_entry_matches_the_kernel_file_of_today():
    """Guards against shipping choices the current kernels would ignore as stale."""
    for key, entry in _shipped_entries().items():
        backend = key.split("|")[0]
        assert backend in ("cuda", "opencl"), f"{key}: no mm_warp kernel for {backend}"
        assert entry["build"]["kernel"] == _kernel_digest(backend), (
            f"{key}: measured with another {backend} mm_warp kernel or its options. After "
            "editing a kernel's code, measure the database again (studies/gpu_fair.sh on the "
            "devices, then scripts/tuning_db.py on their tune caches); a comment is no edit."
        )


def _request(driver: str = "d1", kernel: str = KERNEL) -> ChoiceRequest:
    build = {"kernel": kernel, "driver": driver}
    return ChoiceRequest("cuda", "GPU", "vec4", operation("mm"), "float32", "large", None, build)


def _db_entry(config: warp.WarpConfig, kernel: str = KERNEL) -> dict[str, Any]:
    """An entry as the shipped database holds it (see scripts/tuning_db.py)."""
    return {
        "params": config.to_dict(), "blocks": 512, "tflops": 40.5, "shape": "a shape",
        "build": {"kernel": kernel}, "tuned_at": "2026-11-23T04:42:21Z",
        "how": "xbackend tune (driver d0, xbackend 0.0.1)",
    }  # fmt: skip


def _cache_entry(config: warp.WarpConfig, driver: str = "d1", **more: Any) -> dict[str, Any]:
    """An entry as xbackend tune writes it in the user's cache."""
    build = {"driver": driver, "kernel": KERNEL, "xbackend": xbackend.__version__}
    return {"params": config.to_dict(), "blocks": 512, "shape": "a shape", "build": build, **more}


def _write(path: Path, entries: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"format": tune_cache.FORMAT, "entries": entries}))
    return path


@pytest.fixture
def files(tmp_path, monkeypatch):
    """A tune cache and a database in tmp_path, the database in use; (cache, db)."""
    cache, db = tmp_path / "tuned.json", tmp_path / "db.json"
    monkeypatch.setenv(tune_cache.CACHE_ENV, str(cache))
    monkeypatch.setenv(tuning_db.DB_ENV, str(db))
    return cache, db


def test_the_database_serves_a_product_the_cache_has_no_entry_for(files):
    """Guards the database's place after the cache: with no cache file, its choice."""
    cache, db = files
    _write(db, {KEY: _db_entry(DB_CONFIG)})
    assert CachedChoices(cache).choice(_request()) == DB_CONFIG.to_dict()
    assert CachedChoices().choice(_request()) == DB_CONFIG.to_dict()  # XBACKEND_TUNE_CACHE's file


def test_the_users_cache_wins_over_the_database(files):
    """Guards the order: a user's own tune beats the shipped choice for the same key."""
    cache, db = files
    _write(db, {KEY: _db_entry(DB_CONFIG)})
    _write(cache, {KEY: _cache_entry(CACHE_CONFIG)})
    assert CachedChoices(cache).choice(_request()) == CACHE_CONFIG.to_dict()


def test_a_tie_in_the_users_cache_keeps_the_default_not_the_database(files):
    """Guards a user whose tune found the default best: they get the default (None)."""
    cache, db = files
    _write(db, {KEY: _db_entry(DB_CONFIG)})
    _write(cache, {KEY: _cache_entry(CACHE_CONFIG, tie=True)})
    assert CachedChoices(cache).choice(_request()) is None
    _write(cache, {KEY: _cache_entry(CACHE_CONFIG, tie=False)})
    assert CachedChoices(cache).choice(_request()) == CACHE_CONFIG.to_dict()  # the tie decided it


def test_the_database_holds_on_any_driver_the_cache_only_on_its_own(files):
    """Guards the matching: a database entry measured on another driver and xbackend
    version still holds; a cache entry of another driver is stale (with a warning
    naming the cache) and the database's choice is used instead."""
    cache, db = files
    _write(db, {KEY: _db_entry(DB_CONFIG)})
    assert CachedChoices(cache).choice(_request(driver="d9")) == DB_CONFIG.to_dict()
    _write(cache, {KEY: _cache_entry(CACHE_CONFIG, driver="d0")})
    with pytest.warns(TuneCacheWarning, match=re.escape(str(cache))):
        assert CachedChoices(cache).choice(_request(driver="d1")) == DB_CONFIG.to_dict()


def test_a_database_entry_for_another_kernel_is_ignored_with_a_warning(files):
    """Guards against running a choice measured on a kernel that has since changed."""
    cache, db = files
    _write(db, {KEY: _db_entry(DB_CONFIG, kernel="fedcba9876543210")})
    with pytest.warns(TuneCacheWarning, match=re.escape(str(db))):
        assert CachedChoices(cache).choice(_request()) is None
    assert CachedChoices(cache).choice(_request(kernel="fedcba9876543210")) == DB_CONFIG.to_dict()


def test_the_database_can_be_hidden(files, monkeypatch):
    """Guards XBACKEND_TUNING_DB=off (the untuned measurements) and database=False."""
    cache, db = files
    _write(db, {KEY: _db_entry(DB_CONFIG)})
    assert CachedChoices(cache).choice(_request()) == DB_CONFIG.to_dict()
    assert CachedChoices(cache, database=False).choice(_request()) is None
    monkeypatch.setenv(tuning_db.DB_ENV, "off")
    assert tuning_db.db_path() is None
    assert CachedChoices(cache).choice(_request()) is None


def _script() -> Any:
    spec = importlib.util.spec_from_file_location("tuning_db_script", ROOT / "scripts/tuning_db.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_script_ships_an_entry_matched_on_its_kernel_alone():
    """Guards scripts/tuning_db.py: parameters and race kept, build cut to the kernel
    digest, the driver and version moved into ``how`` as a record."""
    entry = _cache_entry(CACHE_CONFIG, driver="580.1", margin=0.03, tuned_at="2026-11-23T04:42:21Z")
    shipped = _script().shipped_entry(entry, "xbackend tune on an H100")
    assert shipped["params"] == CACHE_CONFIG.to_dict() and shipped["margin"] == 0.03
    assert shipped["build"] == {"kernel": KERNEL}
    version = xbackend.__version__
    assert shipped["how"] == f"xbackend tune on an H100 (driver 580.1, xbackend {version})"
    assert shipped["tuned_at"] == entry["tuned_at"] and entry["build"]["driver"] == "580.1"


def test_the_script_refuses_an_entry_without_a_kernel_digest():
    """Guards against shipping an entry that would hold for any kernel."""
    script = _script()
    for build in ({"driver": "580.1", "xbackend": "0.1.0"}, None):
        entry = {**_cache_entry(CACHE_CONFIG), "build": build}
        with pytest.raises(ValueError, match="kernel digest"):
            script.shipped_entry(entry, "xbackend tune")
