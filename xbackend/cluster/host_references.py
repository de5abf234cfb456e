"""The float64 references of one run, made once per host and shared by its workers.

Every worker of a host measures every size (a line's sizes go in a row to one worker),
and each made each size's full reference itself: two products in float64 on all of the
host's cores, at once on two GPUs' workers. On two H200s' host (32 cores) a 6144² reference
took 1.32 s alone and 2.35 s each when two workers made theirs together, their GPUs idle
meanwhile (docs/notebook/cluster.md). Here the first worker to need one makes it, under a lock
file, and writes it into a folder of the run (``/dev/shm``, memory, where the host has
it); the others wait for the lock and map the same files, read-only.

The folder is the run's alone (a token made by the main process), inside a folder of
the user's alone (refused where it is not: another user's, a link, open to others), and
goes when the workers close (``DevicesPlugin.teardown``). A folder that cannot be
written, or refused, leaves each worker making its own references, as before.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from xbackend.problems import Reference

try:
    import fcntl
except ImportError:  # Windows: no lock to share through
    fcntl = None  # type: ignore[assignment]

# Memory, where the host has it: the files are read back as they were written.
SHARED_MEMORY = Path("/dev/shm")


def run_folder(token: str) -> Path:
    """Where the references of the run ``token`` go on this host."""
    parent = SHARED_MEMORY if SHARED_MEMORY.is_dir() else Path(tempfile.gettempdir())
    return parent / f"xbackend-{os.getuid()}" / f"references-{token}"


def _private(folder: Path) -> None:
    """Make ``folder`` this user's alone, or raise OSError: in a folder every user can
    write (``/dev/shm``), another user could have made it first, or a link of that name,
    and changed a reference between its writing and its reading."""
    folder.mkdir(mode=0o700, exist_ok=True)
    found = os.lstat(folder)
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid() or found.st_mode & 0o077:
        raise OSError(f"{folder} is not this user's private folder")


class HostReferences:
    """The references of one run on this host (the module docstring)."""

    def __init__(self, folder: Path):
        self.folder = folder

    def reference(self, name: str, make: Callable[[], Reference]) -> Reference:
        """The reference ``name`` (what it is of: its operation, type, size, seed),
        made by ``make`` if no worker of this host made it yet."""
        try:
            with self._locked(name):
                found = self._read(name)
                if found is not None:
                    return found
                made = make()
                self._write(name, made)
                return self._read(name) or made
        except OSError:
            return make()  # no folder to share through: this worker's own, as before

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    @contextlib.contextmanager
    def _locked(self, name: str) -> Iterator[None]:
        if fcntl is None:
            raise OSError("no file locks here")
        _private(self.folder.parent)
        self.folder.mkdir(exist_ok=True, mode=0o700)
        with open(self.folder / f"{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # the worker making it holds it
            yield

    def _read(self, name: str) -> Reference | None:
        """The reference as written, its arrays mapped read-only; None before it is
        (its description is written last)."""
        try:
            described = json.loads((self.folder / f"{name}.json").read_text())
        except FileNotFoundError:
            return None
        product = np.load(self.folder / f"{name}.product.npy", mmap_mode="r")
        magnitude = np.load(self.folder / f"{name}.magnitude.npy", mmap_mode="r")
        return Reference(product, magnitude, described["K"], described["exact"])

    def _write(self, name: str, made: Reference) -> None:
        try:
            np.save(self.folder / f"{name}.product.npy", made.product)
            np.save(self.folder / f"{name}.magnitude.npy", made.magnitude)
            description = {"K": made.K, "exact": made.exact}
            (self.folder / f"{name}.json").write_text(json.dumps(description))
        except OSError:  # no room: the other workers make theirs
            for part in ("product.npy", "magnitude.npy", "json"):
                (self.folder / f"{name}.{part}").unlink(missing_ok=True)
