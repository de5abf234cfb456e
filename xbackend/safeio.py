"""Writing files safely: whole or not at all, never through a link, names never from data;
and reading a file a user named without trusting what it is.

Every file xbackend writes whole (figures, reports, the CSV it derives, the tune cache)
goes through :func:`atomic_write`: the bytes go to a fresh temporary file in the same
folder, which is then renamed over the target. A reader sees the old file or the new one,
never half of one, and a symbolic link at the target is refused rather than followed (a
rename would replace the link itself, but a link there is not something xbackend made,
so it says so instead of silently dropping it).

:func:`safe_name` turns text from a results file (a dtype, an operation, a label) into a
file name that stays in its folder, and :func:`printable` turns it into text that a
terminal shows rather than obeys.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
from pathlib import Path

# The largest file of settings or choices read (a tune cache, a database, a floors file):
# far above any real one, so that a runaway file is refused by name, not read into memory.
MAX_READ_BYTES = 64 << 20


class UnsafePath(ValueError):
    """A path xbackend will not write through: a link, or something that is not a file."""


def refuse_link(path: Path) -> None:
    """Raise :class:`UnsafePath` if ``path`` is a symbolic link or exists as a non-file."""
    if path.is_symlink():
        raise UnsafePath(f"{path} is a symbolic link; xbackend does not write through links")
    if path.exists() and not path.is_file():
        raise UnsafePath(f"{path} exists and is not a regular file")


def file_problem(status: os.stat_result, limit: int = MAX_READ_BYTES) -> str | None:
    """Why a file of this status is not read: not a regular file, or over ``limit``."""
    if not stat.S_ISREG(status.st_mode):
        kind = "a folder" if stat.S_ISDIR(status.st_mode) else "a device, FIFO or socket"
        return f"not a regular file ({kind})"
    if status.st_size > limit:
        return f"larger than {limit >> 20} MiB ({status.st_size} bytes)"
    return None


def read_small_text(path: Path, limit: int = MAX_READ_BYTES) -> str:
    """The text of a file a user named, never blocking nor reading without end: a path
    that is no regular file (``/dev/zero``, a FIFO) or one past ``limit`` raises
    ``UnsafePath`` saying so, a missing one ``FileNotFoundError``. Checked before opening
    (a device is not even opened), and again on what was opened (a FIFO put there since
    opens without blocking, and is refused)."""
    problem = file_problem(os.stat(path), limit)
    data = b""
    if problem is None:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(descriptor, "rb") as file:
            problem = file_problem(os.fstat(file.fileno()), limit)
            data = b"" if problem else file.read(limit + 1)
        if len(data) > limit:  # it grew since
            problem = f"larger than {limit >> 20} MiB"
    if problem:
        raise UnsafePath(problem)
    return data.decode("utf-8")


def naming(error: OSError, path: Path | str) -> OSError:
    """``error`` naming ``path``, the file being written: the system names none for a
    ``write`` or an ``fsync`` that fails (a full disk, a file size limit), and a temporary
    name for a rename, so a message from it would not say which file."""
    error.filename, error.filename2 = str(path), None
    return error


def atomic_write(path: Path, data: bytes | str) -> None:
    """Replace ``path`` with ``data`` in one rename; refuse a link at ``path``. An
    ``OSError`` names ``path`` whichever step failed."""
    path = Path(path)
    refuse_link(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as error:
        raise naming(error, path) from None
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(payload)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException as error:
        Path(temporary).unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise naming(error, path) from None
        raise


def output_folder(path: Path) -> Path:
    """Create ``path`` as a folder to write into, or say in one line why it cannot be one."""
    path = Path(path)
    for parent in (path, *path.parents):
        if parent.exists() and not parent.is_dir():
            raise UnsafePath(f"cannot use {path} as a folder: {parent} is not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UnsafePath(f"cannot create the folder {path}: {error.strerror or error}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UnsafePath(f"cannot write into {path}: permission denied")
    return path


_UNSAFE = re.compile(r"[^A-Za-z0-9_.+-]+")


def safe_name(text: object, limit: int = 60) -> str:
    """``text`` as one file-name component: letters, digits and ``_.+-`` only, no leading dot."""
    name = _UNSAFE.sub("_", str(text)).lstrip(".")[:limit]
    return name or "_"


def printable(text: object, keep: str = "") -> str:
    """``text`` with every control character shown as its escape (``\\x1b``, ``\\n``), not
    obeyed, but those of ``keep`` (an error's line breaks): for printing names read from a
    results file or a folder, which are not trusted."""
    return "".join(c if c.isprintable() or c in keep else repr(c)[1:-1] for c in str(text))
