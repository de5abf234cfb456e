"""Results files: one record per measured point, written as it completes, with the machine.

A run folder holds

* ``results.jsonl``, the record: a line describing each run (machine, packages,
  git commit, plan, devices) before its first point, then one line per point,
  raw samples included. Each line is written in one ``write`` as soon as its
  point is done, so an interrupted run keeps every finished point in a file that
  still parses line by line;
* ``results.csv``: the same points, flat, without the raw samples, derived from
  ``results.jsonl`` (and rebuilt from it whenever the folder is opened to write);
* ``.xbackend.lock``: held by the run writing the folder, so there is one at a time;
* the figures (``plots.py``) and the report (``report.py``).

Reading checks every line (:func:`load`): a file that is damaged, or made to look
like results, gives one message naming the file, the line and the field.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import fcntl
import io
import json
import math
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from xbackend.safeio import atomic_write, output_folder, refuse_link

JSONL_NAME = "results.jsonl"
CSV_NAME = "results.csv"


@dataclasses.dataclass
class PointRecord:
    """One (size, backend, device, variant, tile) point of a sweep."""

    run_id: str
    backend: str
    label: str  # how figures and tables name this line, e.g. "opencl:pocl"
    device: str
    variant: str
    tile: int | None
    dtype: str
    M: int
    K: int
    N: int
    flops: int
    status: str  # "ok", "mismatch", "skipped", "error"
    op: str = "mm"  # "mm", "bmm", "rmm"
    batch: int = 1  # products in a bmm
    reason: str = ""
    equal: bool | None = None
    max_abs_error: float | None = None
    bound_ratio: float | None = None
    kernel_s: dict[str, float] | None = None  # Stats of the kernel samples
    end_to_end_s: dict[str, float] | None = None  # Stats of the end-to-end samples
    kernel_samples_s: list[float] = dataclasses.field(default_factory=list)
    end_to_end_samples_s: list[float] = dataclasses.field(default_factory=list)
    gflops: float | None = None  # from the kernel median
    timestamp: str = ""
    params: dict[str, int] | None = None  # every launch parameter of a tuned variant

    def to_dict(self) -> dict[str, Any]:
        return {"type": "point", **dataclasses.asdict(self)}


CSV_FIELDS = [
    "run_id",
    "timestamp",
    "backend",
    "label",
    "device",
    "variant",
    "tile",
    "dtype",
    "M",
    "K",
    "N",
    "flops",
    "status",
    "reason",
    "equal",
    "max_abs_error",
    "bound_ratio",
    "kernel_median_s",
    "kernel_q1_s",
    "kernel_q3_s",
    "kernel_min_s",
    "end_to_end_median_s",
    "end_to_end_q1_s",
    "end_to_end_q3_s",
    "samples",
    "gflops",
]


def now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


# -- reading: every line checked, one clear message per bad line ---------------------------


class ResultsError(ValueError):
    """A results folder or file that cannot be read or written as asked."""


class FolderBusy(ResultsError):
    """Another xbackend process is writing to the folder."""


STATUSES = ("ok", "mismatch", "skipped", "error")
MEASURED = ("ok", "mismatch")
# Dimensions beyond this are no product any device holds: a field that large is damage.
_MAX_DIMENSION = 2**40
_STATS = ("median", "q1", "q3", "min")


class _BadField(Exception):
    def __init__(self, field: str | None, why: str):
        super().__init__(f"field {field!r}: {why}" if field else why)


def _integer(point: dict[str, Any], field: str, low: int, high: int) -> None:
    value = point.get(field)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _BadField(field, f"expected an integer, found {value!r:.40}")
    if not low <= value <= high:
        raise _BadField(field, f"{value} is out of range ({low} to {high})")


def _number(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _BadField(field, f"expected a number, found {value!r:.40}")
    return float(value)


def _seconds(point: dict[str, Any], field: str) -> None:
    stats = point.get(field)
    if not isinstance(stats, dict):
        raise _BadField(field, f"a measured point needs its statistics, found {stats!r:.40}")
    for key in _STATS:
        value = _number(stats.get(key), f"{field}.{key}")
        if not 0.0 <= value < math.inf:
            raise _BadField(f"{field}.{key}", f"{value} is not a time in seconds")


def _checked_point(item: dict[str, Any]) -> dict[str, Any]:
    """The point with defaults for older files (mm, batch 1, float32), or _BadField."""
    point = {"op": "mm", "batch": 1, "dtype": "float32", "reason": "", "tile": None, **item}
    for field in ("run_id", "backend", "label", "device", "variant", "dtype", "op", "reason"):
        if field == "run_id":
            point.setdefault(field, "")
        if not isinstance(point.get(field), str):
            raise _BadField(field, f"expected a string, found {point.get(field)!r:.40}")
    if point.get("status") not in STATUSES:
        raise _BadField("status", f"expected one of {', '.join(STATUSES)}")
    for field in ("M", "K", "N"):
        _integer(point, field, 0, _MAX_DIMENSION)
    _integer(point, "flops", 0, 2 * _MAX_DIMENSION**3)
    _integer(point, "batch", 1, _MAX_DIMENSION)
    if point["tile"] is not None:
        _integer(point, "tile", 0, _MAX_DIMENSION)  # an unrunnable tile is recorded too
    for field in ("max_abs_error", "bound_ratio", "gflops"):
        if point.get(field) is not None:
            point[field] = _number(point[field], field)
    if point.get("equal") not in (None, True, False):
        raise _BadField("equal", "expected true, false or null")
    for field in ("kernel_samples_s", "end_to_end_samples_s"):
        samples = point.setdefault(field, [])
        if not isinstance(samples, list):
            raise _BadField(field, "expected a list of seconds")
        point[field] = [_number(value, field) for value in samples]
    params = point.get("params")
    if params is not None and not (
        isinstance(params, dict) and all(isinstance(v, int) for v in params.values())
    ):
        raise _BadField("params", "expected an object of integers")
    if point["status"] in MEASURED:
        _seconds(point, "kernel_s")
        _seconds(point, "end_to_end_s")
        if point.get("gflops") is None:
            raise _BadField("gflops", "a measured point needs its throughput")
    return point


def _checked_run(item: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(item.get("run_id"), str):
        raise _BadField("run_id", "a run header needs its id")
    for field in ("plan", "environment", "devices"):
        if not isinstance(item.setdefault(field, {}), dict):
            raise _BadField(field, "expected an object")
    return item


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any] | _BadField]]:
    """Each record of a results.jsonl with its line number, or why the line is bad.

    The file streams, line by line. A last line that does not parse is what a
    crash cut short: it is dropped, not reported.
    """
    with path.open("rb") as file:
        line, number = file.readline(), 1
        while line:
            following = file.readline()
            try:
                yield number, _parsed(line)
            except _BadField as error:
                if following or not isinstance(error.__cause__, ValueError):
                    yield number, error
            line, number = following, number + 1


class _BadLine(ResultsError):
    def __init__(self, path: Path, number: int, why: str):
        super().__init__(f"{path}:{number}: {why}")


def _parsed(line: bytes) -> dict[str, Any]:
    try:
        item = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise _BadField(None, "not a JSON line") from error
    if not isinstance(item, dict):
        raise _BadField(None, "not a JSON object")
    return item


def _results_file(given: Path | str) -> Path:
    path = Path(given)
    if path.is_dir():
        path = path / JSONL_NAME
    if not path.exists():
        raise FileNotFoundError(f"no results at {given} (expected {JSONL_NAME})")
    if not path.is_file():
        raise ResultsError(f"{path} is not a results file (not a regular file)")
    return path


# With ``warn``, a file with more bad lines than this is taken for something else.
_MOST_BAD_LINES = 10


def load(
    paths: Iterable[Path | str], *, warn: Callable[[str], None] | None = None
) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """Runs (by run id) and points from results folders or ``results.jsonl`` files.

    Every line is checked: a point comes back with the fields of today's files
    (older files' defaults filled in) and the types its readers rely on. A bad
    line raises :class:`ResultsError` naming the file, the line and the field;
    with ``warn``, it is skipped and ``warn`` told why instead. A last line cut
    short by a crash is dropped either way.
    """
    runs: dict[str, dict[str, Any]] = {}
    points: list[dict[str, Any]] = []
    for given in paths:
        path = _results_file(given)
        bad_lines = 0
        for number, item in _lines(path):
            try:
                if isinstance(item, _BadField):
                    raise item
                kind = item.get("type")
                if kind == "run":
                    run = _checked_run(item)
                    runs[run["run_id"]] = run
                elif kind == "point":
                    points.append(_checked_point(item))
                else:
                    raise _BadField("type", f"expected 'run' or 'point', found {kind!r:.40}")
            except _BadField as error:
                if warn is None:
                    raise _BadLine(path, number, str(error)) from None
                warn(f"{_BadLine(path, number, str(error))}; line skipped")
                bad_lines += 1
                if bad_lines == _MOST_BAD_LINES:
                    warn(f"{path}: {bad_lines} bad lines; the rest of the file is skipped")
                    break
    return runs, points


def point_key(point: dict[str, Any]) -> tuple[Any, ...]:
    """What makes two (loaded) points the same measurement: configuration and size."""
    return tuple(
        point[name]
        for name in ("label", "device", "op", "variant", "tile", "dtype", "batch", "M", "K", "N")
    )


def latest(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One point per key, the last recorded (a resumed or repeated run wins)."""
    return list({point_key(point): point for point in points}.values())


# -- writing: the JSON lines are the record; the CSV is derived from them -------------------


def _csv_row(point: dict[str, Any]) -> dict[str, Any]:
    row = {name: point.get(name) for name in CSV_FIELDS}
    for prefix in ("kernel", "end_to_end"):
        stats = point.get(f"{prefix}_s")
        for key in ("median", "q1", "q3", "min"):
            field = f"{prefix}_{key}_s"
            if field in CSV_FIELDS:
                row[field] = stats[key] if stats else None
    row["samples"] = len(point.get("kernel_samples_s") or ())
    return {name: ("" if row[name] is None else row[name]) for name in CSV_FIELDS}


def _csv_text(rows: Iterable[dict[str, Any]], header: bool) -> str:
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=CSV_FIELDS)
    if header:
        writer.writeheader()
    writer.writerows(rows)
    return text.getvalue()


def write_csv(folder: Path) -> Path:
    """Derive ``results.csv`` from ``results.jsonl``, whole, in one rename."""
    _, points = load([folder / JSONL_NAME])
    path = folder / CSV_NAME
    atomic_write(path, _csv_text((_csv_row(point) for point in points), header=True))
    return path


def _drop_partial_tail(path: Path) -> None:
    """Cut a last line that a crash left unfinished, so new lines do not glue onto it."""
    size = path.stat().st_size
    if size == 0:
        return
    with path.open("rb+") as file:
        file.seek(size - 1)
        if file.read(1) == b"\n":
            return
        kept = 0
        while kept < size:  # the offset just past the last newline, read in chunks
            start = max(0, size - kept - 2**16)
            file.seek(start)
            chunk = file.read(size - kept - start)
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                file.truncate(start + newline + 1)
                return
            kept = size - start
        file.truncate(0)


def _append(fd: int, text: str, path: Path) -> None:
    data = text.encode("utf-8")
    try:
        while data:  # os.write may write less than asked; whole lines are what matters
            data = data[os.write(fd, data) :]
    except OSError as error:  # a full disk, a file size limit: say which file
        raise OSError(error.errno, error.strerror, str(path)) from None


def _open_for_append(path: Path) -> int:
    refuse_link(path)
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o644)


class ResultsWriter:
    """Appends a run's header and its points to ``results.jsonl``; keeps ``results.csv``.

    ``results.jsonl`` is the record: every line goes out in one ``write`` on a
    file opened for appending, as soon as its point is done, so a process killed
    at any moment leaves whole lines behind (a line cut short by a machine crash
    is dropped when the folder is next opened). ``results.csv`` is derived from
    it: rewritten whole when the folder is opened and when the writer closes,
    and appended a row per point in between, so a kill between the two writes
    costs the CSV that row only until the folder is next opened.

    The run header goes out with the first point, so a run that adds nothing
    (a resume of a finished run) leaves the files as they were.
    """

    def __init__(self, folder: Path, run: dict[str, Any] | None = None):
        self.folder = output_folder(folder)
        self.jsonl_path = folder / JSONL_NAME
        self.csv_path = folder / CSV_NAME
        refuse_link(self.jsonl_path)
        if self.jsonl_path.exists():
            _drop_partial_tail(self.jsonl_path)
        self._jsonl = _open_for_append(self.jsonl_path)
        try:
            write_csv(folder)
            self._csv = _open_for_append(self.csv_path)
        except BaseException:
            os.close(self._jsonl)
            raise
        self._run = run
        self.appended = 0

    def write_run(self, run: dict[str, Any]) -> None:
        """Write ``run`` as the header of the points that follow (with the first of them)."""
        self._run = run

    def append(self, record: PointRecord) -> None:
        if self._run is not None:
            header = json.dumps({"type": "run", **self._run}, default=str) + "\n"
            _append(self._jsonl, header, self.jsonl_path)
            self._run = None
        point = record.to_dict()
        _append(self._jsonl, json.dumps(point, default=str) + "\n", self.jsonl_path)
        self.appended += 1
        _append(self._csv, _csv_text([_csv_row(point)], header=False), self.csv_path)

    def close(self) -> None:
        os.close(self._jsonl)
        os.close(self._csv)
        if self.appended:
            write_csv(self.folder)

    def __enter__(self) -> ResultsWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class RunLock:
    """One writing run per folder: an exclusive ``flock`` on ``.xbackend.lock`` inside it.

    The lock belongs to the open file, so the kernel releases it when the process
    ends however it ends; the file itself stays (removing it would race with the
    next run's open).
    """

    NAME = ".xbackend.lock"

    def __init__(self, folder: Path):
        self.path = folder / self.NAME
        refuse_link(self.path)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self._fd, 64, 0).decode("ascii", "replace").strip()
            os.close(self._fd)
            raise FolderBusy(
                f"{folder} is in use by another xbackend run"
                + (f" (process {holder})" if holder.isdigit() else "")
                + "; wait for it to finish, or choose another --out"
            ) from None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"{os.getpid()}\n".encode(), 0)

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # closing the file releases the lock
            self._fd = -1

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()
