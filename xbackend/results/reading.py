"""Reading results files: every line checked, one clear message per bad line.

A file that is damaged, or made to look like results, gives one message naming
the file, the line and the field (:func:`load`); a last line that a crash cut
short is dropped.

Every point read knows its host (its run header's, where the line names none), so that
results of several machines merge without one machine's point taking another's place
(:func:`latest` keeps one point per :attr:`~PointRecord.identity`: host and key).

Results of several runs are kept apart where they overlap: :func:`load_runs` says which
run each point belongs to (its file: a resumed run is one run), and :func:`apart` names
the runs (or their hosts, where those tell them apart) in the labels of the backends that
more than one run measured at the same point, so that figures and tables draw each run's
line instead of keeping one silently.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from xbackend.results.records import PointKey, PointRecord, RecordError, RunHeader
from xbackend.safeio import printable as printable  # one for every command; re-exported

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


# With ``warn``, the bad lines of a file told one by one; the rest are counted, and named
# (up to _NAMED_LINES of them) in one warning at the end of the file.
_TOLD_LINES = 3
_NAMED_LINES = 10


def load(paths: Iterable[Path | str], *, warn: Callable[[str], None] | None = None) -> Loaded:
    """Run headers (by run id) and points from results folders or ``results.jsonl`` files.

    Every line is checked (:meth:`PointRecord.from_dict`). A bad line raises
    :class:`ResultsError` naming the file, the line and the field; with ``warn``,
    it is skipped and every good line of the file is still read: ``warn`` is told why
    for the first few bad lines, and once more with their count and line numbers where
    there were more. A last line cut short by a crash is dropped either way. A point
    without a host gets its run header's (of its file).
    """
    loaded = Loaded({}, [])
    for given in paths:
        path = _results_file(given)
        bad_lines: list[int] = []
        headers: dict[str, RunHeader] = {}
        first = len(loaded.points)
        for number, item in _lines(path):
            try:
                record = _record(_with_host(item, headers))
            except RecordError as error:
                if warn is None:
                    raise _BadLine(path, number, str(error)) from None
                bad_lines.append(number)
                if len(bad_lines) <= _TOLD_LINES:
                    warn(f"{_BadLine(path, number, str(error))}; line skipped")
                continue
            if isinstance(record, RunHeader):
                loaded.runs[record.run_id] = record
                headers[record.run_id] = record
            else:
                loaded.points.append(record)
        if warn is not None and len(bad_lines) > _TOLD_LINES:
            warn(_bad_lines_told(path, bad_lines))
        loaded.points[first:] = _hosted(loaded.points[first:], headers)
    return loaded


def _bad_lines_told(path: Path, numbers: list[int]) -> str:
    """One warning for a file's bad lines: their count and the first few numbers."""
    named = ", ".join(str(number) for number in numbers[:_NAMED_LINES])
    more = ", ..." if len(numbers) > _NAMED_LINES else ""
    return (
        f"{path}: {len(numbers)} bad lines skipped in all (lines {named}{more}); "
        "every other line was read"
    )


def _with_host(
    item: dict[str, Any] | RecordError, headers: Mapping[str, RunHeader]
) -> dict[str, Any] | RecordError:
    """A point's line with its run header's host where it names none (the header read)."""
    if isinstance(item, RecordError) or item.get("type") != "point" or item.get("host"):
        return item
    run_id = item.get("run_id")
    header = headers.get(run_id) if isinstance(run_id, str) else None
    return {**item, "host": header.host} if header is not None and header.host else item


def _hosted(points: list[PointRecord], headers: Mapping[str, RunHeader]) -> list[PointRecord]:
    """``points``, those without a host given their run header's: one that came after
    them in the file (files joined by hand)."""
    return [
        dataclasses.replace(point, host=headers[point.run_id].host)
        if not point.host and point.run_id in headers and headers[point.run_id].host
        else point
        for point in points
    ]


def latest(points: Iterable[PointRecord]) -> list[PointRecord]:
    """One point per identity (host and key), the last recorded (a resumed or repeated
    run wins); two machines' points of one key are both kept.

    Points of several runs go through :func:`apart` first, so that no run's point
    silently takes the place of another's, and no two machines' share a label.
    """
    return list({point.identity: point for point in points}.values())


# -- runs kept apart ---------------------------------------------------------------------------

RunNames = Mapping[int, str]  # id(point) -> the name of the run it belongs to


def _source_name(path: Path) -> str:
    """How a run is named after its file: the folder of a results.jsonl, else the file."""
    return path.parent.name if path.name == JSONL_NAME and path.parent.name else path.name


def _ids_overlap(points: list[PointRecord]) -> bool:
    """Whether two run ids of one file measured the same point (files joined by hand):
    a resume measures only what its file lacks, so its run ids never do."""
    first: dict[PointKey, str] = {}
    for point in points:
        if point.measured and first.setdefault(point.key, point.run_id) != point.run_id:
            return True
    return False


def load_runs(
    paths: Iterable[Path | str],
    *,
    warn: Callable[[str], None] | None = None,
    reader: Callable[..., Loaded] | None = None,
) -> tuple[Loaded, dict[int, str]]:
    """:func:`load`, and the name of the run each point belongs to (by ``id(point)``).

    A run is a results file, named after its folder (the path as given where two
    folders share a name): a resumed run appends to its file under new run ids and
    stays one run. A file whose run ids measured the same point holds one run per id.
    A file given twice is read once. ``reader``: what reads one file (default
    :func:`load`), called as ``reader([path], warn=warn)``.
    """
    reader = reader or load
    merged = Loaded({}, [])
    names: dict[int, str] = {}
    taken: set[str] = set()
    seen: set[Path] = set()
    for given in paths:
        path = _results_file(given)
        if path.resolve() in seen:
            continue
        seen.add(path.resolve())
        part = reader([path], warn=warn)
        merged.runs.update(part.runs)
        merged.points.extend(part.points)
        name = _source_name(path)
        if name in taken:
            name = str(given)
        serial = 2
        while name in taken:
            name, serial = f"{_source_name(path)} #{serial}", serial + 1
        taken.add(name)
        by_id = _ids_overlap(part.points)
        for point in part.points:
            names[id(point)] = f"{name} {point.run_id[:8]}" if by_id else name
    return merged, names


def _run_name(point: PointRecord, runs: RunNames | None) -> str:
    name = None if runs is None else runs.get(id(point))
    return name if name is not None else point.run_id[:8] or "?"


def apart(points: Iterable[PointRecord], runs: RunNames | None = None) -> list[PointRecord]:
    """``points``, with the runs that measured the same point told apart by their labels.

    Where more than one run measured a point of a backend (label and device), every
    point of that backend gets its run's name in its label (``cpu (run NAME)``), or its
    host's where each run is of one host and no two of the same (``cpu (on HOST)``:
    two machines' results), so that each run is drawn and tabled as lines of its own;
    where the overlapping runs used different cache modes, the name says which. Every
    other point is as it was: a single run, or runs that measured different points,
    look as they always did. ``runs``: the run of each point (:func:`load_runs`); None:
    the run ids.
    """
    points = list(points)
    first: dict[PointKey, str] = {}
    overlapping: set[tuple[str, str]] = set()
    for point in points:
        run = _run_name(point, runs)
        if point.measured and first.setdefault(point.key, run) != run:
            overlapping.add((point.label, point.device))
    if not overlapping:
        return points
    shown = [p for p in points if (p.label, p.device) in overlapping]
    modes: dict[str, set[str]] = {}
    for point in shown:
        if point.measured:
            modes.setdefault(_run_name(point, runs), set()).add(point.cache or "warm")
    several = len({frozenset(found) for found in modes.values()}) > 1
    hosts = _hosts_of_runs(shown, runs)
    renamed = {}
    for point in shown:
        name = _run_name(point, runs)
        shown_as = f"on {point.host}" if hosts else f"run {name}"
        if several and name in modes:
            shown_as += f", {'/'.join(sorted(modes[name]))} cache"
        renamed[id(point)] = dataclasses.replace(point, label=f"{point.label} ({shown_as})")
    return [renamed.get(id(point), point) for point in points]


def _hosts_of_runs(points: list[PointRecord], runs: RunNames | None) -> dict[str, str]:
    """The host of each run of ``points``, where every run has one host, named, and no
    two runs the same (the runs are told apart by their hosts); else empty."""
    hosts: dict[str, set[str]] = {}
    for point in points:
        hosts.setdefault(_run_name(point, runs), set()).add(point.host)
    found = {run: next(iter(names)) for run, names in hosts.items() if len(names) == 1}
    named = len(found) == len(hosts) and "" not in found.values()
    return found if named and len(set(found.values())) == len(found) else {}


def warn_on_stderr(message: str) -> None:
    """The ``warn`` of :func:`load` for the command line: one line on stderr per line the
    loader skipped, with control characters shown, not obeyed (the data is not trusted)."""
    print(f"xbackend: warning: {printable(message)}", file=sys.stderr)
