"""Reliability round 3 (issue 30), the tuning and cache findings: the tune cache and the
tuning database named by a device, a FIFO or a huge file; their entries with keys or
numbers that once crashed ``tune --show`` or a lookup; the OpenCL runtime that could not
be registered; ``tune`` of a variant with nothing to tune; and a link at the cache's lock.

The tests that read a device or a FIFO run ``xbackend`` in a subprocess with a timeout
and a memory limit, so that a regression fails them instead of hanging the suite (or
filling memory from ``/dev/zero``).
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xbackend
import xbackend.tuning.cache as tune_cache
import xbackend.tuning.database as tuning_db
from xbackend import tuning
from xbackend.backends import opencl
from xbackend.cli import main
from xbackend.launches import warp
from xbackend.launches.choices import ChoiceRequest
from xbackend.operations import operation
from xbackend.problems import Shape
from xbackend.safeio import UnsafePath
from xbackend.tuning.cache import CachedChoices

SEED = 30
TIMEOUT_S = 30
MEMORY_BYTES = 2 << 30  # the subprocess's address space: /dev/zero cannot fill the machine
KEY = tune_cache.entry_key("cuda", "GPU", "vec4", "mm", "float32", "large")
OTHER_KEY = tune_cache.entry_key("cuda", "GPU", "warp", "mm", "float32", "large")
SPLIT = warp.WarpConfig(64, 64, 16, 64, 64, 8, 4, 2)  # a split: its blocks are refitted
HUGE_INT = 10**400  # a JSON integer no float holds


def _entry(config: warp.WarpConfig = SPLIT, **more: Any) -> dict[str, Any]:
    return {"params": config.to_dict(), "blocks": 512, "tflops": 1.5, "shape": "a shape", **more}


def _write(path: Path, entries: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"format": tune_cache.FORMAT, "entries": entries}))
    return path


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))


def _xbackend(*argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m xbackend ARGV`` with ``env`` added, under a timeout and a memory limit."""
    environment = {**os.environ, **env}
    return subprocess.run(
        [sys.executable, "-m", "xbackend", *argv], env=environment, capture_output=True,
        text=True, timeout=TIMEOUT_S, preexec_fn=_limited, check=False,
    )  # fmt: skip


def _not_files(tmp_path: Path) -> dict[str, Path]:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    return {"zero": Path("/dev/zero"), "urandom": Path("/dev/urandom"), "fifo": fifo}


def _caught(call: Any) -> tuple[Any, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, [str(w.message) for w in caught]


@pytest.fixture(autouse=True)
def _fresh_warnings(monkeypatch, tmp_path):
    """Each warning again in every test, and a cache of this test's own."""
    monkeypatch.setattr(tune_cache, "_warned", set())
    monkeypatch.setenv(tune_cache.CACHE_ENV, str(tmp_path / "tuned.json"))


# Finding 5: a device, a FIFO or a huge file named as the cache or the database.


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["zero", "urandom", "fifo"])
@pytest.mark.parametrize("variable", [tuning_db.DB_ENV, tune_cache.CACHE_ENV])
def test_a_device_or_fifo_named_as_a_tune_file_is_refused_by_name(tmp_path, kind, variable):
    """Guards finding 5: ``tune --show`` hung (FIFO, /dev/urandom) or filled memory
    (/dev/zero); now the file is ignored with one warning naming the variable and path."""
    path = _not_files(tmp_path)[kind]
    done = _xbackend("tune", "--show", **{variable: str(path)})
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert f"{variable}={path}" in done.stderr and "not a regular file" in done.stderr


def test_a_tune_file_past_the_size_cap_is_refused_by_name(tmp_path, monkeypatch):
    """Guards finding 5's bound: a file larger than any real cache is not read whole."""
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as file:
        file.truncate(tuning_db.MAX_FILE_BYTES + 1)  # sparse: no disk, no time
    monkeypatch.setenv(tune_cache.CACHE_ENV, str(huge))
    entries, messages = _caught(tune_cache.load_entries)
    assert entries == {}
    assert len(messages) == 1 and f"{tune_cache.CACHE_ENV}={huge}" in messages[0]
    assert "larger than" in messages[0], messages


def test_the_lookup_of_a_backend_refuses_a_fifo_too(tmp_path):
    """Guards finding 5 on the backends' path (``CachedChoices``), not only ``--show``."""
    fifo = _not_files(tmp_path)["fifo"]
    db_fifo = tmp_path / "db-fifo.json"
    os.mkfifo(db_fifo)
    code = (
        "import warnings; warnings.simplefilter('always')\n"
        "from xbackend.launches.choices import ChoiceRequest\n"
        "from xbackend.operations import operation\n"
        "from xbackend.tuning.cache import CachedChoices\n"
        "mm = operation('mm')\n"
        "request = ChoiceRequest('cuda', 'GPU', 'vec4', mm, 'float32', 'large', None)\n"
        "print('choice', CachedChoices().choice(request))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT_S,
        env={**os.environ, tune_cache.CACHE_ENV: str(fifo), tuning_db.DB_ENV: str(db_fifo)},
        preexec_fn=_limited, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and "choice None" in done.stdout, done.stderr
    assert f"{tune_cache.CACHE_ENV}={fifo}" in done.stderr
    assert f"{tuning_db.DB_ENV}={db_fifo}" in done.stderr


def _unwritable_cache(tmp_path: Path, kind: str) -> Path:
    """A cache path tune cannot write: a FIFO, a file past the cap, a link at its lock."""
    if kind == "fifo":
        return _not_files(tmp_path)["fifo"]
    cache = tmp_path / "tuned.json"
    if kind == "huge":
        with open(cache, "wb") as file:
            file.truncate(tuning_db.MAX_FILE_BYTES + 1)
    else:
        (tmp_path / "tuned.json.lock").symlink_to(tmp_path / "planted")
    return cache


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fifo", "huge", "lock link"])
def test_tune_refuses_a_cache_it_cannot_write_before_it_searches(tmp_path, kind):
    """Guards findings 5 and 14 for the writer: a tune would search for minutes, then
    fail to write its choices (or replace a huge file); it is refused at once, naming the
    variable (exit 2)."""
    cache = _unwritable_cache(tmp_path, kind)
    done = _xbackend("tune", "--backends", "cpu", **{tune_cache.CACHE_ENV: str(cache)})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"{tune_cache.CACHE_ENV}={cache}" in done.stderr, done.stderr
    assert not (tmp_path / "planted").exists()


# Finding 8: keys without a bar, numbers too large for a float.

BAD_KEYS = {"no bar": "nobar", "empty": "", "fields empty": "|||||"}
BAD_NUMBERS = {
    "margin": _entry(margin=HUGE_INT),
    "tflops": _entry(tflops=HUGE_INT),
    "blocks": _entry(blocks=HUGE_INT),
    "race_seconds": _entry(race_seconds=HUGE_INT),
    "interval_s": _entry(interval_s=[0.001, HUGE_INT]),
}


def _show(capsys) -> tuple[int, str, list[str]]:
    code, messages = _caught(lambda: main(["tune", "--show"]))
    return code, capsys.readouterr().out, messages


@pytest.mark.parametrize("bad", sorted(BAD_KEYS))
def test_show_warns_of_a_database_key_without_its_fields(tmp_path, monkeypatch, capsys, bad):
    """Guards finding 8: ``tune --show`` raised IndexError on a database key without ``|``."""
    db = _write(tmp_path / "db.json", {BAD_KEYS[bad]: _entry(), KEY: _entry()})
    monkeypatch.setenv(tuning_db.DB_ENV, str(db))
    code, out, messages = _show(capsys)
    assert code == 0
    assert "1 entries, for GPU" in out
    assert any(str(db) in m and repr(BAD_KEYS[bad]) in m for m in messages), messages


@pytest.mark.parametrize("bad", sorted(BAD_KEYS))
def test_show_warns_of_a_cache_key_without_its_fields(tmp_path, monkeypatch, capsys, bad):
    """Guards finding 8 in the user's cache: such a key was shown as if it were one."""
    cache = _write(tmp_path / "tuned.json", {BAD_KEYS[bad]: _entry(), KEY: _entry()})
    monkeypatch.setenv(tuning_db.DB_ENV, tuning_db.HIDDEN)
    code, out, messages = _show(capsys)
    assert code == 0 and "1 entries" in out and KEY in out
    assert any(str(cache) in m and repr(BAD_KEYS[bad]) in m for m in messages), messages


@pytest.mark.parametrize("field", sorted(BAD_NUMBERS))
def test_show_warns_of_a_number_too_large_for_a_float(tmp_path, monkeypatch, capsys, field):
    """Guards finding 8: a huge ``margin`` or ``tflops`` raised OverflowError in --show;
    now the entry is ignored with a warning naming the file and key, the rest shown."""
    cache = _write(tmp_path / "tuned.json", {KEY: BAD_NUMBERS[field], OTHER_KEY: _entry()})
    db = _write(tmp_path / "db.json", {KEY: BAD_NUMBERS[field], OTHER_KEY: _entry()})
    monkeypatch.setenv(tuning_db.DB_ENV, str(db))
    code, out, messages = _show(capsys)
    assert code == 0 and "1 entries" in out and OTHER_KEY in out and f"{KEY}:" not in out
    for path in (cache, db):
        assert any(str(path) in m and repr(KEY) in m and field in m for m in messages), (
            path,
            messages,
        )


def _request() -> ChoiceRequest:
    return ChoiceRequest(
        "cuda", "GPU", "vec4", operation("mm"), "float32", "large", (256, 256, 65536)
    )


@pytest.mark.parametrize("field", sorted(BAD_NUMBERS))
@pytest.mark.parametrize("where", ["cache", "database"])
def test_a_backends_lookup_ignores_a_number_too_large_for_a_float(
    tmp_path, monkeypatch, field, where
):
    """Guards finding 8 on the backends' path: a huge ``blocks`` raised OverflowError in
    the refit of a split; every such entry is ignored with a warning, and the default
    used."""
    path = _write(tmp_path / f"{where}.json", {KEY: BAD_NUMBERS[field]})
    cache = path if where == "cache" else tmp_path / "none.json"
    monkeypatch.setenv(tuning_db.DB_ENV, str(path) if where == "database" else tuning_db.HIDDEN)
    config, messages = _caught(lambda: CachedChoices(cache).choice(_request()))
    assert config is None
    assert any(str(path) in m and repr(KEY) in m for m in messages), messages


def test_a_backends_lookup_warns_of_a_key_without_its_fields(tmp_path, monkeypatch):
    """Guards finding 8 on the backends' path: such keys were dropped without a word."""
    cache = _write(tmp_path / "tuned.json", {"": _entry(), "nobar": _entry(), KEY: _entry()})
    monkeypatch.setenv(tuning_db.DB_ENV, tuning_db.HIDDEN)
    config, messages = _caught(lambda: CachedChoices(cache).choice(_request()))
    assert config is not None and config["BM"] == SPLIT.BM  # the good entry still serves
    assert len(messages) == 1 and str(cache) in messages[0]
    assert "''" in messages[0] and "'nobar'" in messages[0]


# Finding 11: the pip OpenCL runtime that could not be registered.


def _fake_runtime(tmp_path: Path, monkeypatch) -> Path:
    """A pip runtime "installed" in tmp_path, its libraries loaded by no one, and an
    XDG_CACHE_HOME under a regular file: no folder can be made there, even as root."""
    library = tmp_path / "lib" / "libintelocl.so"
    library.parent.mkdir()
    library.write_text("not a library")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setattr(opencl, "_registered", False)
    monkeypatch.setattr(opencl, "_registration_problem", None, raising=False)
    monkeypatch.setattr(opencl, "_pip_runtime_library", lambda: library)
    monkeypatch.setattr(ctypes, "CDLL", lambda *args, **kwargs: None)
    monkeypatch.delenv(opencl.NO_PIP_RUNTIME_ENV, raising=False)
    monkeypatch.setenv("OCL_ICD_VENDORS", str(tmp_path / "no-vendors"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker / "cache"))
    return blocker


def test_an_unwritable_cache_says_the_runtime_was_not_registered(tmp_path, monkeypatch):
    """Guards finding 11: the reason said to install a driver, which was there."""
    cl = pytest.importorskip("pyopencl")
    blocker = _fake_runtime(tmp_path, monkeypatch)
    monkeypatch.setattr(cl, "get_platforms", lambda: [])
    available, reason = opencl.OpenCLBackend.available()
    assert not available
    assert "could not be registered" in reason and "Install a driver" not in reason
    assert str(blocker / "cache" / "xbackend" / "OpenCL") in reason
    assert "Not a directory" in reason or "File exists" in reason, reason


@pytest.mark.slow
def test_devices_says_where_the_runtime_could_not_be_registered(tmp_path):
    """Guards finding 11 end to end, where Intel's runtime is installed by pip."""
    if opencl._pip_runtime_library() is None:
        pytest.skip("Intel's CPU OpenCL runtime is not installed by pip here")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    env = {"XDG_CACHE_HOME": str(blocker / "cache"), "OCL_ICD_VENDORS": str(tmp_path)}
    done = _xbackend("devices", "--no-run", **env)
    line = next(text for text in done.stdout.splitlines() if text.startswith("opencl:"))
    assert "could not be registered" in line and str(blocker / "cache") in line, line


# Finding 12: a variant with nothing to tune for the operation asked for.


def _opencl() -> xbackend.Backend:
    try:
        return xbackend.get_backend("opencl")
    except xbackend.BackendUnavailable as error:
        pytest.skip(f"opencl unavailable: {error.reason}")


def test_tune_of_a_variant_with_nothing_to_tune_says_so(tmp_path, capsys):
    """Guards finding 12: ``tune --op rmm --variants vec4`` printed an empty table, cached
    nothing and exited 0; it now names rmm's tuned variants and exits 2."""
    _opencl().close()
    code = main(["tune", "--backends", "opencl", "--op", "rmm", "--variants", "vec4"])
    err = capsys.readouterr().err
    assert code == 2
    assert "vec4 has nothing to tune for rmm" in err and "vec4_db, warp_db" in err, err
    assert not (tmp_path / "tuned.json").exists()


def test_tune_says_which_variants_it_skips_for_an_operation():
    """Guards finding 12 in ``tuning.tune`` itself: a variant it cannot tune for an
    operation is said once, not dropped without a word."""
    lines: list[str] = []
    with _opencl() as backend:
        results = tuning.tune(
            backend, ["vec4"], [Shape(64, 64, 64)], np.dtype("float32"), ops=("rmm",),
            seed=SEED, progress=lines.append,
        )  # fmt: skip
    assert results == []
    assert any("vec4 has nothing to tune for rmm" in line for line in lines), lines


# Finding 14: a link at the cache's lock.


def test_a_link_at_the_cache_lock_is_refused(tmp_path):
    """Guards finding 14: the lock was opened through a link, creating its target."""
    cache = tmp_path / "tuned.json"
    target = tmp_path / "elsewhere" / "planted"
    target.parent.mkdir()
    (tmp_path / "tuned.json.lock").symlink_to(target)
    with pytest.raises(UnsafePath, match=r"tuned\.json\.lock is a symbolic link"):
        tune_cache.update_entries({KEY: _entry()}, cache)
    assert not target.exists() and not cache.exists()


def test_a_link_at_the_cache_lock_to_a_file_leaves_it_alone(tmp_path):
    """Guards finding 14: a link to an existing file neither changes it nor is followed."""
    cache = tmp_path / "tuned.json"
    target = tmp_path / "precious"
    target.write_text("keep me")
    (tmp_path / "tuned.json.lock").symlink_to(target)
    with pytest.raises(UnsafePath):
        tune_cache.save_entries({KEY: _entry()}, cache)
    assert target.read_text() == "keep me" and not cache.exists()
