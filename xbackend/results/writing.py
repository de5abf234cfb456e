"""Writing a results folder: the JSON lines are the record; the CSV is derived from them.

``results.jsonl`` gets a run header before a run's first point, then one line per
point, each in one ``write`` as soon as its point is done. ``results.csv`` holds
the same points flat, without the raw samples, with each point's host (its own where
a cluster's worker measured it, else its run's), its worker and its step in the
schedule; it is rebuilt from ``results.jsonl`` whenever the
folder is opened to write. ``.xbackend.lock`` is held by the run writing the folder.
"""

from __future__ import annotations

import csv
import fcntl
import io
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from xbackend.results.reading import CSV_NAME, JSONL_NAME, FolderBusy, load
from xbackend.results.records import PointRecord, RunHeader
from xbackend.safeio import atomic_write, naming, output_folder, refuse_link

CSV_FIELDS = [
    "run_id",
    "timestamp",
    "host",
    "worker",
    "step",
    "backend",
    "label",
    "device",
    "op",
    "variant",
    "tile",
    "dtype",
    "batch",
    "M",
    "K",
    "N",
    "flops",
    "status",
    "reason",
    "equal",
    "max_abs_error",
    "bound_ratio",
    "check",
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
_STATS = ("median", "q1", "q3", "min")


def _csv_row(point: PointRecord, host: str) -> dict[str, Any]:
    fields = point.to_dict()
    row = {name: fields.get(name) for name in CSV_FIELDS}
    row["host"] = point.host or host  # a cluster's point names its worker's host
    for prefix, stats in (("kernel", point.kernel_s), ("end_to_end", point.end_to_end_s)):
        for key in _STATS:
            field = f"{prefix}_{key}_s"
            if field in CSV_FIELDS:
                row[field] = stats.get(key) if stats else None
    row["samples"] = len(point.kernel_samples_s)
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
    runs, points = load([folder / JSONL_NAME])
    hosts = {run_id: run.host for run_id, run in runs.items()}
    rows = (_csv_row(point, hosts.get(point.run_id, "")) for point in points)
    path = folder / CSV_NAME
    atomic_write(path, _csv_text(rows, header=True))
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
        raise naming(error, path) from None


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
    (a resume of a finished run) leaves the files as they were; and where there are no
    files yet, they are made with the first point, so a run stopped before it leaves
    none (nothing to resume, and nothing that refuses the same command again).
    """

    def __init__(self, folder: Path, run: RunHeader | None = None):
        self.folder = output_folder(folder)
        self.jsonl_path = folder / JSONL_NAME
        self.csv_path = folder / CSV_NAME
        refuse_link(self.jsonl_path)
        self._jsonl = self._csv = -1
        if self.jsonl_path.exists():
            _drop_partial_tail(self.jsonl_path)
            self._open()
        self._pending: RunHeader | None = None
        self._host = ""
        if run is not None:
            self.write_run(run)
        self.appended = 0

    def _open(self) -> None:
        """Open both files to append, ``results.csv`` derived again from ``results.jsonl``."""
        self._jsonl = _open_for_append(self.jsonl_path)
        try:
            write_csv(self.folder)
            self._csv = _open_for_append(self.csv_path)
        except BaseException:
            os.close(self._jsonl)
            self._jsonl = -1
            raise

    def write_run(self, run: RunHeader) -> None:
        """Write ``run`` as the header of the points that follow (with the first of them)."""
        self._pending = run
        self._host = run.host

    def append(self, record: PointRecord) -> None:
        if self._jsonl < 0:
            self._open()
        if self._pending is not None:
            header = json.dumps(self._pending.to_dict(), default=str) + "\n"
            _append(self._jsonl, header, self.jsonl_path)
            self._pending = None
        _append(self._jsonl, json.dumps(record.to_dict(), default=str) + "\n", self.jsonl_path)
        self.appended += 1
        _append(self._csv, _csv_text([_csv_row(record, self._host)], header=False), self.csv_path)

    def close(self) -> None:
        for fd in (self._jsonl, self._csv):
            if fd >= 0:
                os.close(fd)
        self._jsonl = self._csv = -1
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
        try:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as error:  # a full disk: say which file
            os.close(self._fd)
            raise naming(error, self.path) from None

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # closing the file releases the lock
            self._fd = -1

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()
