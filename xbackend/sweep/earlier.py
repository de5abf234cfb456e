"""How long a plan's points took in the runs already in ``results/``: ``compare --dry-run``'s
prediction where the run to come has nothing recorded of its own (issue 53: a dry run beside
a folder of earlier runs said "predicted time: unknown").

A point's time is what the sweep spent on it, its check, warm-up and samples included: the
time from its start (its ``timestamp``) to the next point's start in the same file (the last
point's: to the file's last write). The timestamps are whole seconds, so one point's figure
is rough, but a configuration's sum over its sizes is right to a second or two. Where
several earlier runs measured a point, the newest one's time is taken: the host's load then
is in it, and is said (its run header's load average).
"""

from __future__ import annotations

import dataclasses
import datetime
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from xbackend import results as results_io
from xbackend.measuring.timing import format_seconds
from xbackend.results import PointKey, PointRecord, RunHeader
from xbackend.results.plan import Plan
from xbackend.sweep.configs import configs

if TYPE_CHECKING:
    from xbackend.backends.interface import Backend

# The most earlier runs read (the newest), and the longest a point may have taken for its
# time to count (past it, the sweep was interrupted or suspended between two points).
NEWEST_RUNS = 20
LONGEST_POINT_S = 3600.0


@dataclasses.dataclass(frozen=True)
class Earlier:
    """Each point's time in the newest earlier run that measured it, and those runs' loads."""

    seconds: dict[PointKey, float] = dataclasses.field(default_factory=dict)
    runs: int = 0
    loads: tuple[float, ...] = ()  # the runs' one-minute load averages as they started

    def predict(self, keys: Iterable[PointKey]) -> tuple[float, int, int]:
        """The summed time of ``keys`` known here, how many were known and how many not."""
        wanted = list(keys)
        known = [self.seconds[key] for key in wanted if key in self.seconds]
        return sum(known), len(known), len(wanted) - len(known)

    def said(self, total_s: float, known: int, unknown: int) -> str:
        """The dry run's last line: the predicted time, and what it rests on."""
        loads = sorted(self.loads)
        load = "" if not loads else (
            f"; the host's load average then {loads[0]:.3g}"
            + (f"-{loads[-1]:.3g}" if loads[-1] != loads[0] else "")
            + ": a busier host takes longer"
        )  # fmt: skip
        left = f", {unknown} points measured in none of them (not counted)" if unknown else ""
        return (
            f"predicted time: {seconds_text(total_s)} for the points (start-up, figures and "
            f"report on top), from {known} points as long as they took in {self.runs} earlier "
            f"run{'s' * (self.runs != 1)} beside --out{left}{load}"
        )


def seconds_text(seconds: float) -> str:
    """A time from whole-second stamps: "under 1 s", or seconds to three digits."""
    return "under 1 s" if seconds < 1 else format_seconds(float(f"{seconds:.3g}"))


def _started(text: str) -> float | None:
    try:
        return datetime.datetime.fromisoformat(text).timestamp()
    except (TypeError, ValueError):
        return None


def point_seconds(points: Sequence[PointRecord], last_write: float) -> dict[PointKey, float]:
    """Each point's time in one run's file (in its order): to the next point's start, the
    last one's to ``last_write``; a point without a readable start, or longer than
    ``LONGEST_POINT_S``, has none, and so has the last point before a resume's first."""
    starts = [_started(point.timestamp) for point in points]
    found: dict[PointKey, float] = {}
    for index, (point, start) in enumerate(zip(points, starts, strict=True)):
        end: float | None = last_write
        if index + 1 < len(points):  # a resume's first point did not follow this one
            same_run = points[index + 1].run_id == point.run_id
            end = starts[index + 1] if same_run else None
        if start is not None and end is not None and 0 <= end - start <= LONGEST_POINT_S:
            found[point.key] = end - start
    return found


def _folders(root: Path, leave_out: Path) -> list[Path]:
    """The newest ``NEWEST_RUNS`` results folders under ``root``, ``leave_out`` not among them."""
    try:
        left_out = leave_out.resolve()
        found = [
            folder for folder in root.iterdir()
            if (folder / results_io.JSONL_NAME).is_file() and folder.resolve() != left_out
        ]  # fmt: skip
    except OSError:
        return []
    found.sort(key=lambda folder: (folder / results_io.JSONL_NAME).stat().st_mtime)
    return found[-NEWEST_RUNS:]


def read(root: Path, leave_out: Path) -> Earlier:
    """What the runs under ``root`` (the folder of ``--out``, ``results/`` by default) say of
    each point's time; a file that cannot be read is passed over (a dry run changes nothing,
    and a bad line is said by the commands that read it)."""
    seconds: dict[PointKey, float] = {}
    loads: list[float] = []
    runs = 0
    for folder in _folders(root, leave_out):  # oldest first: a newer run's time wins
        path = folder / results_io.JSONL_NAME
        try:
            loaded = results_io.load([path], warn=lambda _: None)
            last_write = os.stat(path).st_mtime
        except (OSError, ValueError):
            continue
        timed = point_seconds(loaded.points, last_write)
        if timed:
            seconds.update(timed)
            runs += 1
            loads += _loads(loaded.runs.values())
    return Earlier(seconds, runs, tuple(loads))


def _loads(headers: Iterable[RunHeader]) -> list[float]:
    found = []
    for header in headers:
        load = (header.environment.get("host_load") or {}).get("load")
        if isinstance(load, list) and load and isinstance(load[0], int | float):
            found.append(float(load[0]))
    return found


def amended(
    lines: Sequence[str], plan: Plan, opened: Sequence[tuple[str, Backend]],
    recorded: Iterable[PointRecord], earlier: Earlier,
) -> list[str]:  # fmt: skip
    """A dry run's lines (``runner.plan_lines``), where they say a time is unknown, with
    the time the earlier runs took instead (each configuration's whose every point left
    to run they measured; the total, of the points they measured)."""
    if not earlier.seconds:
        return list(lines)
    done = {point.key for point in recorded if point.status != "skipped"}
    by_title: dict[str, list[PointKey]] = {}
    for config in configs(plan, opened):
        if not config.problem:
            keys = [config.record("", shape, step, plan.batch).key
                    for step, shape in enumerate(plan.shapes, start=1)]  # fmt: skip
            by_title[config.title] = [key for key in keys if key not in done]
    found = []
    for line in lines:
        title = line.strip().split(":", 1)[0]
        if line.endswith("time unknown until measured") and title in by_title:
            total_s, _, unknown = earlier.predict(by_title[title])
            if not unknown:
                line = line.replace("time unknown until measured",
                                    f"{seconds_text(total_s)} in the earlier runs")  # fmt: skip
        elif line.startswith("predicted time: unknown"):
            total_s, known, unknown = earlier.predict(k for keys in by_title.values() for k in keys)
            line = earlier.said(total_s, known, unknown) if known else line
        found.append(line)
    return found
