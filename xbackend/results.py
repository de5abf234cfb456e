"""Results files: one record per measured point, written as it completes, with the machine.

A run folder holds

* ``results.jsonl``: the first line describes the run (machine, packages, git
  commit, plan, devices); every later line is one point, raw samples included.
  Each line is flushed as soon as it is written, so an interrupted run keeps
  every finished point in a file that still parses line by line;
* ``results.csv``: the same points, flat, without the raw samples;
* the figures (``plots.py``).
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import io
import json
import os
import platform
import subprocess
import sys
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

from xbackend.backends.cpu import cpu_name

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


def _csv_row(record: PointRecord) -> dict[str, Any]:
    row = {name: getattr(record, name) for name in CSV_FIELDS if hasattr(record, name)}
    for prefix, stats in (("kernel", record.kernel_s), ("end_to_end", record.end_to_end_s)):
        for key in ("median", "q1", "q3", "min"):
            field = f"{prefix}_{key}_s"
            if field in CSV_FIELDS:
                row[field] = stats[key] if stats else ""
    row["samples"] = len(record.kernel_samples_s)
    return {name: ("" if row.get(name) is None else row[name]) for name in CSV_FIELDS}


def now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def _git_commit() -> dict[str, Any]:
    """The commit of the source tree xbackend runs from, if it is a git checkout."""
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return {}
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {}
    return {"git_commit": commit, "git_dirty": bool(dirty)}


def _version_of(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def environment() -> dict[str, Any]:
    """The machine and software a run happened on."""
    from xbackend import __version__

    packages = ("numpy", "pyopencl", "pycuda", "matplotlib", "intel-opencl-rt")
    return {
        "xbackend": __version__,
        **_git_commit(),
        "host": platform.node(),
        "os": platform.platform(),
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "packages": {name: _version_of(name) for name in packages if _version_of(name)},
        "command": " ".join(sys.argv),
    }


def _drop_partial_tail(path: Path) -> None:
    """Cut a last line that a crash left unfinished, so new lines do not glue onto it."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with path.open("rb+") as file:
        data = file.read()
        if data.endswith(b"\n"):
            return
        file.truncate(data.rfind(b"\n") + 1)


def _append(fd: int, text: str) -> None:
    data = text.encode("utf-8")
    while data:  # os.write may write less than asked; whole lines are what matters
        data = data[os.write(fd, data) :]


class ResultsWriter:
    """Appends a run's header and its points to ``results.jsonl`` and ``results.csv``.

    Every line goes out in one ``write`` on a file opened for appending, as soon as
    its point is done: a process killed at any moment leaves whole lines behind
    (at worst the last one missing), and a line cut short by a machine crash is
    dropped when the folder is next written to or read.
    """

    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.jsonl_path = folder / JSONL_NAME
        self.csv_path = folder / CSV_NAME
        for path in (self.jsonl_path, self.csv_path):
            _drop_partial_tail(path)
        new_csv = not self.csv_path.exists() or self.csv_path.stat().st_size == 0
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        self._jsonl = os.open(self.jsonl_path, flags, 0o644)
        self._csv = os.open(self.csv_path, flags, 0o644)
        if new_csv:
            self._write_csv_row({name: name for name in CSV_FIELDS})

    def write_run(self, run: dict[str, Any]) -> None:
        _append(self._jsonl, json.dumps({"type": "run", **run}, default=str) + "\n")

    def append(self, record: PointRecord) -> None:
        _append(self._jsonl, json.dumps(record.to_dict(), default=str) + "\n")
        self._write_csv_row(_csv_row(record))

    def _write_csv_row(self, row: dict[str, Any]) -> None:
        line = io.StringIO()
        csv.DictWriter(line, fieldnames=CSV_FIELDS).writerow(row)
        _append(self._csv, line.getvalue())

    def close(self) -> None:
        for fd in (self._jsonl, self._csv):
            os.close(fd)

    def __enter__(self) -> ResultsWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def point_key(point: dict[str, Any]) -> tuple[Any, ...]:
    """What makes two points the same measurement: configuration and size.

    Files written before bmm, rmm and dtypes existed read as float32 mm.
    """
    return (
        point["label"],
        point["device"],
        point.get("op", "mm"),
        point["variant"],
        point.get("tile"),
        point.get("dtype", "float32"),
        point.get("batch", 1),
        point["M"],
        point["K"],
        point["N"],
    )


def latest(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One point per key, the last recorded (a resumed or repeated run wins)."""
    return list({point_key(point): point for point in points}.values())


def load(paths: Iterable[Path | str]) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """Runs (by run id) and points from results folders or ``results.jsonl`` files.

    A last line cut short by a crash is skipped; any other bad line is an error.
    """
    runs: dict[str, dict[str, Any]] = {}
    points: list[dict[str, Any]] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            path = path / JSONL_NAME
        if not path.exists():
            raise FileNotFoundError(f"no results at {given} (expected {JSONL_NAME})")
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError:
                if number == len(lines):
                    continue  # the line a crash cut short
                raise ValueError(f"{path}:{number}: not a JSON line") from None
            if item.get("type") == "run":
                runs[item["run_id"]] = item
            elif item.get("type") == "point":
                points.append(item)
    return runs, points
