"""The gradebook: one row a submission and kernel, from what its check process recorded.

A row says the kernel's verdict over every shape and sanitizer (``equal`` only where all
agree), the shapes where it fails, the sanitizer's finding with file and line, the first
wrong result's detail (what it looks like, the launch that made it), its median time at
the largest size with the interval of that median, and its speed-up over the
submission's own naive kernel, over xbackend's tiled kernel and over the vendor's GEMM
on the same backend (each a ratio of two medians measured in one check, on one device).
``rank`` orders the equal kernels by time, a backend at a time.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence

from xbackend.analysis.speedups import baselines
from xbackend.errors import XBackendError
from xbackend.grading.checking import TIMED_SAMPLES
from xbackend.grading.records import (
    COMPILER,
    SANITIZERS,
    Described,
    Records,
    Timing,
    Verdict,
    compact,
    language_of,
)
from xbackend.measuring.host_load import BUSY_CORES
from xbackend.operations import Shape

REFERENCES = ("naive", "tiled", "vendor")  # xbackend's lines timed beside a class's kernels
COLUMNS = (
    "submission", "backend", "variant", "kernel", "file", "verdict", "shapes", "finding",
    "detail", "time_s", "interval_pct", "clock", "vs_own_naive", "vs_xbackend_tiled",
    "vs_vendor", "rank", "dtype", "low_s", "high_s", "timed_at",
)  # fmt: skip
_RATIOS = (("own naive", "vs_own_naive"), ("xbackend tiled", "vs_xbackend_tiled"),
           ("vendor", "vs_vendor"))  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Row:
    """One kernel of one submission on one backend."""

    submission: str
    backend: str  # as --backends names it; "-" where no backend here runs it
    variant: str
    kernel: str
    file: str
    verdict: str  # "equal", "WRONG", "NOT RUN", "compiles" (nvcc, no device to run it)
    shapes: str  # "equal at all 46", "WRONG at 3 of 46: 7×13·13×5, ..."
    finding: str  # a sanitizer's report, with file and line; "" where none
    detail: str  # the first failing verdict's detail
    timing: Timing | None
    speedups: dict[str, float]  # "own naive", "xbackend tiled", "vendor" -> ratio
    verdicts: tuple[Verdict, ...] = ()  # every verdict behind the row, in order
    rank: int | None = None
    tied: bool = False  # another kernel of its ranking has its rank ("3=")

    def cells(self) -> list[str]:
        """The row as the CSV writes it."""
        t = self.timing
        ratio = [f"{self.speedups[k]:.3g}" if k in self.speedups else "" for k, _ in _RATIOS]
        timed = [f"{t.median_s:.6g}", f"{100 * t.spread:.2f}", t.clock] if t else ["", "", ""]
        bounds = ([t.dtype, f"{t.low_s:.6g}", f"{t.high_s:.6g}",
                   f"{t.shape.M}x{t.shape.K}x{t.shape.N}"] if t else ["", "", "", ""])  # fmt: skip
        return [
            self.submission, self.backend, self.variant, self.kernel, self.file, self.verdict,
            self.shapes, self.finding, self.detail, *timed, *ratio, rank_said(self), *bounds,
        ]  # fmt: skip

    @classmethod
    def from_cells(cls, cells: Mapping[str, str]) -> Row:
        """A row as an earlier check wrote it (``cells``: by column); ``ValueError`` where
        a number or a size does not read."""
        timing = None
        if cells["time_s"]:
            M, K, N = (int(v) for v in cells["timed_at"].split("x"))
            timing = Timing(cells["backend"], cells["variant"], Shape(M, K, N),
                            float(cells["time_s"]), float(cells["low_s"]),
                            float(cells["high_s"]), cells["clock"], 0, cells["dtype"])  # fmt: skip
        speedups = {key: float(cells[column]) for key, column in _RATIOS if cells[column]}
        return cls(
            cells["submission"], cells["backend"], cells["variant"], cells["kernel"],
            cells["file"], cells["verdict"], cells["shapes"], cells["finding"],
            cells["detail"], timing, speedups,
        )  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Kept:
    """An earlier check's gradebook, less the submissions checked again (``--merge``):
    its rows, its check.csv lines, and its submissions' order."""

    rows: list[Row]
    verdicts: list[list[str]]
    order: list[str]


def rows(
    submission: str, found: Records, references: Mapping[str, Timing], shapes: int
) -> list[Row]:
    """The rows of one submission: a kernel a backend, in the order checked."""
    by_key: dict[tuple[str, str], list[Verdict]] = defaultdict(list)
    for verdict in found.verdicts:
        by_key[language_of(verdict.label), verdict.variant].append(verdict)
    timings = {(t.label, t.variant): t for t in found.timings}
    described = {d.variant: d for d in found.variants}
    pairs = baselines(d.variant for d in found.variants)
    made = []
    for (backend, variant), verdicts in by_key.items():
        what = described.get(variant)
        timed = timings.get((backend, variant))
        ratios = _speedups(timed, timings.get((backend, pairs.get(variant, ""))),
                           backend, references)  # fmt: skip
        made.append(
            Row(submission, backend, variant, what.kernel if what else "",
                _file(what, backend), verdict_of(verdicts), shapes_of(verdicts, shapes),
                _finding(verdicts), _first_detail(verdicts), timed, ratios, tuple(verdicts))
        )  # fmt: skip
    order = {d.variant: index for index, d in enumerate(found.variants)}
    return sorted(made, key=lambda row: (order.get(row.variant, len(order)), row.backend))


def _file(what: Described | None, backend: str) -> str:
    if what is None:
        return ""
    language = backend.split(":")[0]
    return what.files.get(language, ", ".join(what.files.values()))


def verdict_of(verdicts: Sequence[Verdict]) -> str:
    """One word for a kernel: WRONG if any result or sanitizer says so, NOT RUN where it
    did not run everywhere, ``compiles`` where nvcc built it and nothing ran it."""
    if any(v.equal is False for v in verdicts):
        return "WRONG"
    if any(v.equal is None for v in verdicts):
        return "NOT RUN"
    ran = [v for v in verdicts if v.shape is not None]
    return "equal" if ran else "compiles"


def passed(verdicts: Sequence[str]) -> bool:
    """A submission's kernels' words: equal wherever they ran, and run somewhere (a
    kernel nvcc built for no device here is neither)."""
    return "equal" in verdicts and set(verdicts) <= {"equal", "compiles"}


def shapes_of(verdicts: Sequence[Verdict], shapes: int) -> str:
    """Where the kernel was checked and how it went, in a few words."""
    ran = [v for v in verdicts if v.shape is not None]
    if not ran:
        return ""
    bad = [v for v in ran if v.equal is not True]
    if not bad:
        return f"equal at all {len(ran)}"
    shown = ", ".join(compact(v.shape) for v in bad[:4])
    more = " ..." if len(bad) > 4 else ""
    cut = ""
    if len(ran) < shapes and bad[-1] is ran[-1]:  # its process hung or died there
        cut = f"; {shapes - len(ran)} larger not run"
    counts = {word: sum(1 for v in bad if v.word == word) for word in ("WRONG", "NOT RUN")}
    words = ", ".join(f"{word} at {n}" for word, n in counts.items() if n)
    return f"{words} of {len(ran)}: {shown}{more}{cut}"


def _finding(verdicts: Sequence[Verdict]) -> str:
    said = [f"{v.label}: {v.detail}" for v in verdicts  # a report, or "not sanitized: why"
            if v.label in SANITIZERS.values()]  # fmt: skip
    return "; ".join(said)


def _first_detail(verdicts: Sequence[Verdict]) -> str:
    """The first verdict that is not equal, as it was said (nvcc's build included)."""
    for verdict in verdicts:
        if verdict.equal is not True and verdict.label not in SANITIZERS.values():
            return verdict.detail
    nvcc = [v.detail for v in verdicts if v.label == COMPILER]
    return nvcc[0] if nvcc else ""


def _speedups(
    timed: Timing | None, naive: Timing | None, backend: str, references: Mapping[str, Timing]
) -> dict[str, float]:
    """Ratios of medians (the other's time over this kernel's: above 1, this one is faster)."""
    if timed is None or timed.median_s <= 0:
        return {}
    found = {}
    if naive is not None:
        found["own naive"] = naive.median_s / timed.median_s
    for name, key in (("tiled", "xbackend tiled"), ("vendor", "vendor")):
        other = references.get(f"{backend} {name}")
        if other is not None and (other.shape, other.dtype) == (timed.shape, timed.dtype):
            found[key] = other.median_s / timed.median_s
    return found


def ranked(all_rows: Sequence[Row]) -> list[Row]:
    """The rows with ``rank`` set: the equal, timed kernels of each backend and element
    type, fastest first. A kernel's rank is one more than the number of kernels surely
    faster (whose 95% interval lies wholly below its own), so that kernels whose intervals
    overlap share a rank (``tied``): an order the times do not tell is never given."""
    by_backend: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for row in all_rows:
        if row.verdict == "equal" and row.timing is not None:
            by_backend[row.backend, row.timing.dtype].append(row)
    ranks: dict[int, int] = {}
    for group in by_backend.values():
        for row in group:
            mine = row.timing
            assert mine is not None  # grouped for it
            faster = [o for o in group if o.timing and o.timing.high_s < mine.low_s]
            ranks[id(row)] = 1 + len(faster)
    place = {id(row): (key, ranks[id(row)]) for key, group in by_backend.items() for row in group}
    counts = Counter(place.values())
    return [
        dataclasses.replace(row, rank=ranks.get(id(row)),
                            tied=id(row) in place and counts[place[id(row)]] > 1)
        for row in all_rows
    ]  # fmt: skip


def rank_said(row: Row) -> str:
    """A row's rank as the gradebook writes it: ``3``, or ``3=`` where it is shared."""
    if row.rank is None:
        return ""
    return f"{row.rank}=" if row.tied else str(row.rank)


def host_sentence(loads: Sequence[tuple[str, float | None]], jobs: int = 1) -> str | None:
    """What other processes took of the host while each submission was checked (its
    name, and the cores they took; None: not known), in a sentence where it was busy;
    with ``jobs`` over 1, the submissions checked beside each are among those others."""
    known = [(name, cores) for name, cores in loads if cores is not None]
    busy = [(name, cores) for name, cores in known if cores >= BUSY_CORES]
    if not busy:
        return None
    names = ", ".join(name for name, _ in busy[:8]) + (" ..." if len(busy) > 8 else "")
    most = max(cores for _, cores in busy)
    return (
        f"the host was busy: other processes took half a core or more while {len(busy)} of "
        f"{len(known)} submissions were checked ({names}; up to {most:.2g} cores"
        + (f"; with --jobs {jobs}, the submissions checked beside each among them" if jobs > 1
           else "")
        + "): their times read slower than on a quiet machine"
    )  # fmt: skip


def times_sentence(shape: Shape, jobs: int) -> str:
    """How a check takes its times, in a sentence for the gradebook."""
    how = ("one submission at a time, each in a process of its own" if jobs == 1
           else f"{jobs} submissions at a time: their times were taken side by side")  # fmt: skip
    return (
        f"times: each equal kernel's median over at most {TIMED_SAMPLES} timed runs at "
        f"{compact(shape)}, with the 95% interval of that median, on the clock its row "
        f"names; {how}"
    )


# A cell a spreadsheet would take for a formula (OWASP's CSV injection): one beginning with
# these is written after a ``'``, and so is one beginning with ``'``, so that reading it back
# takes exactly one off. A lone "-" (no backend) and a number stay as they are.
_FORMULA = ("=", "+", "-", "@", "\t", "\r", "'")


def _quoted(cell: str) -> str:
    if not cell.startswith(_FORMULA) or cell == "-":
        return cell
    try:
        float(cell)
        return cell
    except ValueError:
        return "'" + cell


def _unquoted(cell: str) -> str:
    return cell[1:] if cell.startswith("'") else cell


def _writer(text: io.StringIO) -> Callable[[Sequence[str]], None]:
    writer = csv.writer(text)
    return lambda cells: writer.writerow([_quoted(cell) for cell in cells])


def csv_text(all_rows: Sequence[Row]) -> str:
    """The gradebook as CSV: a header, then a row a submission and kernel."""
    text = io.StringIO()
    write = _writer(text)
    write(COLUMNS)
    for row in all_rows:
        write(row.cells())
    return text.getvalue()


VERDICT_COLUMNS = ("submission", "backend", "variant", "M", "K", "N", "verdict", "detail")


def verdicts_csv(
    by_submission: Sequence[tuple[str, Records]], kept: Sequence[Sequence[str]] = (),
    order: Mapping[str, int] | None = None,
) -> str:  # fmt: skip
    """Every verdict at every shape (check.csv): the submission first; ``kept``: the lines
    of an earlier check's submissions, as they were; the submissions in ``order`` (else
    the earlier check's first)."""
    lines = [list(line) for line in kept]
    for submission, found in by_submission:
        for v in found.verdicts:
            sizes = [str(n) for n in (v.shape.M, v.shape.K, v.shape.N)] if v.shape else [""] * 3
            lines.append([submission, v.label, v.variant, *sizes, v.word, v.detail])
    if order is not None:  # a stable sort: each submission's lines stay in their order
        lines.sort(key=lambda line: order.get(line[0], len(order)))
    text = io.StringIO()
    write = _writer(text)
    write(VERDICT_COLUMNS)
    for line in lines:
        write(line)
    return text.getvalue()


def read_rows(text: str, name: str = "gradebook.csv") -> list[Row]:
    """The rows of a gradebook an earlier check wrote (``--merge``); an error naming the
    file and the line where one does not read as this version writes it."""
    return [_row(line, cells, name) for line, cells in _read(text, COLUMNS, name)]


def _row(line: int, cells: dict[str, str], name: str) -> Row:
    try:
        return Row.from_cells(cells)
    except ValueError as error:
        raise XBackendError(f"{name} line {line}: not a gradebook row ({error})") from None


def read_verdicts(text: str, name: str = "check.csv") -> list[list[str]]:
    """The lines of an earlier check's check.csv, as they are (``--merge``)."""
    return [[cells[c] for c in VERDICT_COLUMNS] for _, cells in _read(text, VERDICT_COLUMNS, name)]


def _read(text: str, columns: Sequence[str], name: str) -> list[tuple[int, dict[str, str]]]:
    reader = csv.reader(io.StringIO(text))
    header = next(reader, [])
    if tuple(header) != tuple(columns):
        raise XBackendError(
            f"{name}: its columns are not those this version of xbackend writes, so it "
            "cannot be merged into; check into a new folder"
        )
    found = []
    for cells in reader:
        if len(cells) != len(columns):
            raise XBackendError(
                f"{name} line {reader.line_num}: {len(cells)} cells, not {len(columns)}"
            )
        found.append((reader.line_num, dict(zip(columns, map(_unquoted, cells), strict=True))))
    return found
