"""Reading results files: every line checked, one clear message per bad line.

A file that is damaged, or made to look like results, gives one message naming
the file, the line and the field (:func:`load`); a last line that a crash cut
short is dropped.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from xbackend.results.records import PointRecord, RecordError, RunHeader

JSONL_NAME = "results.jsonl"
CSV_NAME = "results.csv"


class ResultsError(ValueError):
    """A results folder or file that cannot be read or written as asked."""


class FolderBusy(ResultsError):
    """Another xbackend process is writing to the folder."""


class Loaded(NamedTuple):
    """What results files hold: the run headers by run id, and the points in file order."""

    runs: dict[str, RunHeader]
    points: list[PointRecord]


class _BadLine(ResultsError):
    def __init__(self, path: Path, number: int, why: str):
        super().__init__(f"{path}:{number}: {why}")


def _parsed(line: bytes) -> dict[str, Any]:
    try:
        item = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise RecordError(None, "not a JSON line") from error
    if not isinstance(item, dict):
        raise RecordError(None, "not a JSON object")
    return item


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any] | RecordError]]:
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
            except RecordError as error:
                if following or not isinstance(error.__cause__, ValueError):
                    yield number, error
            line, number = following, number + 1


def _results_file(given: Path | str) -> Path:
    path = Path(given)
    if path.is_dir():
        path = path / JSONL_NAME
    if not path.exists():
        raise FileNotFoundError(f"no results at {given} (expected {JSONL_NAME})")
    if not path.is_file():
        raise ResultsError(f"{path} is not a results file (not a regular file)")
    return path


def _record(item: dict[str, Any] | RecordError) -> RunHeader | PointRecord:
    if isinstance(item, RecordError):
        raise item
    kind = item.get("type")
    if kind == "run":
        return RunHeader.from_dict(item)
    if kind == "point":
        return PointRecord.from_dict(item)
    raise RecordError("type", f"expected 'run' or 'point', found {kind!r:.40}")


# With ``warn``, a file with more bad lines than this is taken for something else.
_MOST_BAD_LINES = 10


def load(paths: Iterable[Path | str], *, warn: Callable[[str], None] | None = None) -> Loaded:
    """Run headers (by run id) and points from results folders or ``results.jsonl`` files.

    Every line is checked (:meth:`PointRecord.from_dict`). A bad line raises
    :class:`ResultsError` naming the file, the line and the field; with ``warn``,
    it is skipped and ``warn`` told why instead. A last line cut short by a crash
    is dropped either way.
    """
    loaded = Loaded({}, [])
    for given in paths:
        path = _results_file(given)
        bad_lines = 0
        for number, item in _lines(path):
            try:
                record = _record(item)
            except RecordError as error:
                if warn is None:
                    raise _BadLine(path, number, str(error)) from None
                warn(f"{_BadLine(path, number, str(error))}; line skipped")
                bad_lines += 1
                if bad_lines == _MOST_BAD_LINES:
                    warn(f"{path}: {bad_lines} bad lines; the rest of the file is skipped")
                    break
                continue
            if isinstance(record, RunHeader):
                loaded.runs[record.run_id] = record
            else:
                loaded.points.append(record)
    return loaded


def latest(points: Iterable[PointRecord]) -> list[PointRecord]:
    """One point per key, the last recorded (a resumed or repeated run wins)."""
    return list({point.key: point for point in points}.values())


def warn_on_stderr(message: str) -> None:
    """The ``warn`` of :func:`load` for the command line: one line on stderr per line the
    loader skipped, with control characters shown, not obeyed (the data is not trusted)."""
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
    print(f"xbackend: warning: {shown}", file=sys.stderr)
