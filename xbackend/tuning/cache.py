"""The tune cache: ``xbackend tune``'s choices in one JSON file, and the backends' view of it.

The best configuration per (backend, device, variant, operation, dtype, shape class)
lives in ``$XDG_CACHE_HOME/xbackend/tuned.json`` (``~/.cache`` by default) or the path
in ``XBACKEND_TUNE_CACHE``. A backend takes these choices when it is handed
``cached_choices()`` (``attach``; ``xbackend.get_backend`` does that): the file is read
once per process, and again whenever it changes. Without an entry the tuned variants
take the shipped tuning database's (``tuning/database.py``), and without one there either,
the default derived from the device's limits (``launches/warp.py``).

Like pyopencl's binary cache, an entry records what it was tuned for beyond its key
(``build``: the driver's version, a digest of the kernel file and its fixed build
options, xbackend's version), and a choice made for another build is stale and
ignored. An entry without ``build`` was written by hand and holds wherever its key
matches. Writes read, change and replace the file under a lock (``tuned.json.lock``
beside it), so tuners running together lose nothing.

An entry of a tune that raced its finalists also says how sure its choice is
(optional, so that entries without them still load): ``margin`` (the runner-up's
median kernel time over the winner's, minus 1), ``interval_s`` and
``runner_up_interval_s`` (bootstrap 95% intervals of their medians, in seconds),
``separated`` (the winner's interval lies below every other finalist's), ``tie``
(the best did not separate from the default configuration, which was kept), and
``race_samples`` and ``race_seconds``. A tie entry holds the default's parameters at
the tuned size, and its products run the size-aware default, as without a cache.

The file is edited by hand and shared between versions, so nothing in it is trusted:
an entry that is malformed (its key without its six fields, a number no float holds),
or whose parameters the launch planner would refuse, is ignored with a
``TuneCacheWarning`` naming the file and the key (once per file and process), and its
products use the default. Nor is the file's kind trusted: a path that names no regular
file (``/dev/zero``, a FIFO, a folder) or a huge one (``safeio.read_small_text``) is
ignored the same way, named by the variable that chose it, without a byte read; and the
lock is never opened through a link (``safeio``'s rule for every file xbackend writes).
A write keeps what it does not understand (issue 54): the entries it ignores and keys of
the file's own are written back as read; a file it cannot read at all (another version's
format, no JSON) reads as empty with a warning and is never written over
(``ForeignCache``, with the way round).
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

import xbackend.tuning.database as tuning_db
from xbackend.backends.interface import Backend
from xbackend.errors import XBackendError
from xbackend.launches.choices import Candidate, ChoiceRequest
from xbackend.operations import operation
from xbackend.resources import user_cache_dir
from xbackend.safeio import (
    UnsafePath,
    atomic_write,
    file_problem,
    read_small_text,
    refuse_link,
)
from xbackend.tuning.entries import KEY_FIELDS, _shorten, candidate
from xbackend.tuning.entries import entry_problem as entry_problem  # the tuner's name for it
from xbackend.tuning.entries import key_fields as key_fields
from xbackend.tuning.objective import ENERGY
from xbackend.version import VERSION

CACHE_ENV = "XBACKEND_TUNE_CACHE"
FORMAT = 3  # 2: keys name the operation, entries count their blocks; 3: and their build


def cache_path() -> Path:
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    return user_cache_dir() / "tuned.json"


class TuneCacheWarning(UserWarning):
    """Part of the tune cache was ignored: the message names the file and says why."""


class ForeignCache(XBackendError):
    """The tune cache holds what this version cannot read (another version's format, no
    JSON): writing it would lose that, so it is not written; the message says the way round."""


_warned: set[tuple[str, str]] = set()  # (file, what): each warning once per process
_LISTED = 20  # bad entries named in one warning


def _warn_once(path: Path, what: str, message: str) -> None:
    marker = (os.path.abspath(path), what)
    if marker not in _warned:
        _warned.add(marker)
        warnings.warn(message, TuneCacheWarning, stacklevel=3)


NEIGHBOUR = {"medium": "large", "large": "medium"}


def entry_key(
    backend: str, device: str, variant: str, op: str, dtype: str, shape_class: str
) -> str:
    return "|".join((backend, device, variant, op, dtype, shape_class))


def _named(path: Path) -> tuple[str, str]:
    """``path`` as the user chose it (``VARIABLE=path`` where a variable names it), and
    what it is: the tune cache or the tuning database."""
    named = ((CACHE_ENV, "the tune cache"), (tuning_db.DB_ENV, "the tuning database"))
    for variable, what in named:
        chosen = os.environ.get(variable, "")
        if chosen and Path(chosen) == path:
            return f"{variable}={path}", what
    return str(path), "the tuning database" if path == tuning_db.SHIPPED else "the tune cache"


def _read_json(path: Path) -> Any:
    """The JSON of a cache or database file; None (with a warning naming it, and the
    variable that chose it) where it cannot be read, or is no JSON."""
    named, what = _named(path)
    try:
        text = read_small_text(path)
    except FileNotFoundError:
        return None
    except UnsafePath as error:
        _warn_once(path, "file", f"{named}: {error}; {what} is ignored")
        return None
    except (OSError, UnicodeDecodeError) as error:
        _warn_once(path, "file", f"{named}: cannot read {what} ({error}); ignored")
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as error:
        _warn_once(path, "file", f"{named}: {what} is not JSON ({_shorten(error)}); ignored")
        return None


def load_entries(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """The well-formed cached choices (see ``entry_problem`` and ``key_fields``).

    A missing file, or one of another format (another version's), is an empty cache.
    An unreadable file (no regular file, or too large: ``safeio.read_small_text``), one
    that is not JSON, and every malformed entry are ignored with a ``TuneCacheWarning``
    naming the file (and the entries' keys).
    """
    path = path or cache_path()
    data = _read_json(path)
    problem = None if data is None else _foreign(data)
    if data is None or problem:
        if problem:
            named, what = _named(path)
            _warn_once(path, "file", f"{named}: {problem}; {what} is ignored")
        return {}
    entries = data.get("entries", {})
    good, bad = {}, {}
    for key, entry in entries.items():
        problem = entry_problem(entry)
        if key_fields(key) is None:
            wanted = f"the key is not {'|'.join(KEY_FIELDS)}"
            problem = f"{problem}; {wanted}" if problem else wanted
        if problem is None:
            good[key] = entry
        else:
            bad[key] = problem
    if bad:
        listed = [f"{_shorten(key, 80)!r}: {_shorten(problem)}" for key, problem in bad.items()]
        more = f"; and {len(bad) - _LISTED} more" if len(bad) > _LISTED else ""
        _warn_once(
            path,
            "entries",
            f"{path}: ignoring {len(bad)} malformed {'entry' if len(bad) == 1 else 'entries'} "
            f"of {_named(path)[1]} ({'; '.join(listed[:_LISTED])}{more}); "
            "their products use the default parameters (run xbackend tune again to replace them)",
        )
    return good


def _foreign(data: Any) -> str | None:
    """Why the JSON ``data`` of a cache or database is not this version's to read or
    write, or None where it is."""
    if not isinstance(data, dict):
        return "it is not a JSON object"
    if data.get("format") != FORMAT:
        held = "no format" if "format" not in data else f"format {_shorten(data['format'])}"
        return (f"it holds {held} (another xbackend version's; this one reads and writes "
                f"format {FORMAT})")  # fmt: skip
    if not isinstance(data.get("entries", {}), dict):
        return "its 'entries' is not an object"
    return None


def _as_read(path: Path) -> dict[str, Any]:
    """The cache file's whole JSON object, to be written back changed: what this version
    ignores (an entry it refuses, a key of the user's) included; a missing or empty file
    is an empty cache. ``ForeignCache`` where the file is another version's or no JSON:
    written over, whatever it holds would be lost."""
    named, _ = _named(path)
    way_round = f"point {CACHE_ENV} at a file of its own for this version, or move it aside"
    try:
        text = read_small_text(path)
    except FileNotFoundError:
        text = ""
    except (OSError, UnicodeDecodeError) as error:
        raise ForeignCache(f"{named}: cannot read it ({error}): {way_round}") from None
    if not text.strip():
        return {"format": FORMAT, "entries": {}}
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as error:
        problem: str | None = f"it is not JSON ({_shorten(error)})"
    else:
        problem = _foreign(data)
    if problem:
        raise ForeignCache(f"{named}: {problem}; a tune would write over its entries: {way_round}")
    data.setdefault("entries", {})
    return dict(data)


def _open_lock(path: Path) -> int:
    """Open (or create) the lock file ``path``, never through a link (a link planted
    there would have the lock create its target) nor blocking on a FIFO: either is
    refused by name (``UnsafePath``); one planted after that check fails to open
    (``O_NOFOLLOW``: ELOOP; ``O_NONBLOCK``: ENXIO) or is refused on what was opened."""
    refuse_link(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    descriptor = os.open(path, flags, 0o644)
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise UnsafePath(f"{path} exists and is not a regular file")
    return descriptor


def _lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


def check_writable(path: Path | None = None) -> None:
    """Raise ``UnsafePath`` naming the cache (and the variable that chose it) where its
    choices could not be written: a link, or something that is no regular file, at it or
    at its lock; or a file too large to be one, which a write would replace; and
    ``ForeignCache`` where it holds what this version cannot read (``_as_read``). ``tune``
    asks before it searches, not minutes later."""
    path = path or cache_path()
    try:
        for target in (path, _lock_path(path)):
            refuse_link(target)
        problem = file_problem(path.stat()) if path.exists() else None
        if problem:
            raise UnsafePath(problem)
    except UnsafePath as error:
        raise UnsafePath(f"{_named(path)[0]}: {error}; the tune cache cannot be written") from None
    _as_read(path)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold the lock of the cache file ``path`` (the file ``tuned.json.lock`` beside it),
    so that one writer at a time reads, changes and replaces it, threads included."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with os.fdopen(_open_lock(_lock_path(path)), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _write(data: Mapping[str, Any], path: Path) -> None:
    """Write the cache's object whole, through a temporary file of its own, so a reader
    never sees half of it."""
    atomic_write(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def save_entries(entries: dict[str, dict[str, Any]], path: Path | None = None) -> Path:
    """Replace the cache with ``entries``, under its lock."""
    path = path or cache_path()
    with _locked(path):
        _write({"format": FORMAT, "entries": entries}, path)
    return path


def update_entries(changes: Mapping[str, dict[str, Any]], path: Path | None = None) -> Path:
    """Add or replace the entries ``changes`` and keep every other one, those this version
    ignores too: the file is read, changed and replaced under its lock, so that tuners
    running together lose nothing. ``ForeignCache`` (nothing written) where the file is
    another version's or no JSON (``_as_read``)."""
    path = path or cache_path()
    with _locked(path):
        data = _as_read(path)
        data["entries"] = {**data["entries"], **changes}
        _write(data, path)
    return path


def current_build(backend: Backend, variant: str, op: str = "mm") -> dict[str, str]:
    """What a choice for ``variant`` on ``backend`` is tuned for: the backend's
    ``kernel_build`` (driver, kernel digest) and xbackend's version."""
    return {**backend.kernel_build(variant, op), "xbackend": VERSION}


def _stale(entry: Mapping[str, Any], request: ChoiceRequest, shipped: bool) -> str | None:
    """How an entry's build differs from the request's, or None where it holds. An
    entry of the shipped database is compared on what it records (tuning/database.py)."""
    recorded = entry.get("build")
    if recorded is None:
        return None  # written by hand: it holds wherever its key matches
    wanted = {**request.build, "xbackend": VERSION}
    if shipped:
        return ", ".join(tuning_db.stale_fields(recorded, wanted)) or None
    names = {*recorded, *wanted}
    changed = sorted(name for name in names if recorded.get(name) != wanted.get(name))
    return ", ".join(changed) or None


def choose(entries: Mapping[str, Any], request: ChoiceRequest, path: Path) -> Candidate | None:
    """The cached configuration for ``request``'s product, or None (see ``find``)."""
    return find(entries, request, path)[1]


def find(
    entries: Mapping[str, Any], request: ChoiceRequest, path: Path, *, shipped: bool = False
) -> tuple[bool, Candidate | None]:
    """Whether ``entries`` hold a choice for ``request``'s product, and its
    configuration (None: the default, where the entry is a tie).

    A class with no entry takes its neighbour's where both fill the GPU without a
    split (medium and large), so that tuning one large size serves both; an rmm
    with neither takes mm's choice, the product of its pair sums being an mm
    (``Operation.tuned_as``). With a ``size`` (the output's M and N, and K), a split
    choice is refitted to that size: as many K ranges as give the blocks its tuned
    launch had (see ``Candidate.refitted``), so a small output gets a deeper split
    than the tuned one. An entry for another build, or one that the request's
    ``check`` refuses, is ignored with a warning, as if not there. A tie entry (the
    tuned best did not beat the default) gives None: the size-aware default.
    ``shipped``: ``entries`` are the shipped database's (see ``_stale``).
    """
    classes = list(filter(None, (request.shape_class, NEIGHBOUR.get(request.shape_class))))
    for entry_op in request.op.tuned_as:
        for entry_class in classes:
            key = entry_key(request.backend, request.device, request.variant, entry_op,
                       request.dtype, entry_class)  # fmt: skip
            entry = entries.get(key)
            if entry is None:
                continue
            changed = _stale(entry, request, shipped)
            if changed:
                _warn_once(path, f"{key} {changed}", f"{path}: ignoring the entry {key!r}, "
                           f"tuned for another {changed} (run xbackend tune again)")  # fmt: skip
                continue
            if entry.get("tie"):
                return True, None
            config = candidate(entry["params"])  # checked by load_entries
            blocks = entry.get("blocks", 0)
            if config.slices > 1 and request.size is not None and blocks > 0:
                config = config.refitted(blocks, *request.size)
            problem = request.check(config.to_dict()) if request.check else None
            if problem:
                _warn_once(path, key, f"{path}: ignoring the entry {key!r}: {_shorten(problem)}")
                continue
            return True, config
    return False, None


def lookup(
    backend: Any,
    variant: str,
    dtype: np.dtype[Any] | str,
    shape_class: str,
    op: str = "mm",
    size: tuple[int, int, int] | None = None,
    check: Callable[[Mapping[str, int]], str | None] | None = None,
) -> Candidate | None:
    """The cached configuration for a product on ``backend``'s device, or None: the
    file as it is now, read through ``choose``. ``backend`` needs a ``name`` and a
    ``device.name``; a ``Backend`` also gives the build its choices must match."""
    path = cache_path()
    build = backend.kernel_build(variant, op) if isinstance(backend, Backend) else {}
    request = ChoiceRequest(
        backend.name, backend.device.name, variant, operation(op), np.dtype(dtype).name,
        shape_class, size, build, check,
    )  # fmt: skip
    return choose(load_entries(path), request, path)


class CachedChoices:
    """The tune cache, then the shipped tuning database, as the backends' ``Choices``:
    each file is read once per process, and again whenever it changes (its size, time
    or inode); ``XBACKEND_TUNE_CACHE`` and ``XBACKEND_TUNING_DB`` are followed as they
    are at each product. ``database=False``: the tune cache alone."""

    def __init__(self, path: Path | None = None, *, database: bool = True):
        self._path = path
        self._database = database
        self._read: dict[Path, tuple[tuple[int, int, int] | None, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def entries(self) -> tuple[Path, dict[str, Any]]:
        """The tune cache's path and well-formed entries."""
        return self._entries(self._path or cache_path())

    def database(self) -> tuple[Path, dict[str, Any]] | None:
        """The tuning database's path and well-formed entries; None where it is hidden."""
        path = tuning_db.db_path() if self._database else None
        return None if path is None else self._entries(path)

    def _entries(self, path: Path) -> tuple[Path, dict[str, Any]]:
        try:
            status = path.stat()
            stamp: tuple[int, int, int] | None = (status.st_mtime_ns, status.st_size, status.st_ino)
        except OSError:
            stamp = None
        with self._lock:
            known = self._read.get(path)
            if known is None or known[0] != stamp:
                known = self._read[path] = (stamp, load_entries(path))
        return path, known[1]

    def describe(self, backend: str, device: str) -> dict[str, Any]:
        """Where a device's tuned variants take their choices from, for a run's header:
        the cache and the database, each with its entries for this backend and device
        (and the cache's tuned for energy, where it has any: ``objective.py``)."""
        prefix = f"{backend}|{device}|"
        path, entries = self.entries()
        described: dict[str, Any] = {
            "tune_cache": str(path),
            "tune_cache_entries": sum(key.startswith(prefix) for key in entries),
            "tuning_db": tuning_db.HIDDEN,
        }
        energy = [
            k for k, e in entries.items() if k.startswith(prefix) and e.get("objective") == ENERGY
        ]
        if energy:  # choices tuned for joules, not time: the run says which it ran
            described["tune_cache_energy_entries"] = len(energy)
        database = self.database()
        if database is not None:
            described["tuning_db"] = str(database[0])
            described["tuning_db_entries"] = sum(key.startswith(prefix) for key in database[1])
        return described

    def choice(self, request: ChoiceRequest) -> dict[str, int] | None:
        path, entries = self.entries()
        found, config = find(entries, request, path)
        database = None if found else self.database()
        if database is not None:
            config = find(database[1], request, database[0], shipped=True)[1]
        return None if config is None else config.to_dict()


_cached = CachedChoices()


def cached_choices() -> CachedChoices:
    """The tune cache's choices, one reader per process."""
    return _cached


def attach(backend: Backend) -> Backend:
    """Hand ``backend`` the tune cache's choices (what ``xbackend.get_backend`` does)."""
    backend.use_choices(cached_choices())
    return backend
