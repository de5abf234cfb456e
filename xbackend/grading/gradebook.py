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
from collections import defaultdict
from collections.abc import Mapping, Sequence

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
from xbackend.speedups import baselines

REFERENCES = ("naive", "tiled", "vendor")  # xbackend's lines timed beside a class's kernels
COLUMNS = (
    "submission", "backend", "variant", "kernel", "file", "verdict", "shapes", "finding",
    "detail", "time_s", "interval_pct", "clock", "vs_own_naive", "vs_xbackend_tiled",
    "vs_vendor", "rank",
)  # fmt: skip


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

    def cells(self) -> list[str]:
        """The row as the CSV writes it."""
        t = self.timing
        ratio = [f"{self.speedups[k]:.3g}" if k in self.speedups else ""
                 for k in ("own naive", "xbackend tiled", "vendor")]  # fmt: skip
        return [
            self.submission, self.backend, self.variant, self.kernel, self.file, self.verdict,
            self.shapes, self.finding, self.detail, f"{t.median_s:.6g}" if t else "",
            f"{100 * t.spread:.2f}" if t else "", t.clock if t else "", *ratio,
            str(self.rank or ""),
        ]  # fmt: skip


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
    type by median time, fastest first (the interval beside says where two are not told
    apart)."""
    by_backend: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for row in all_rows:
        if row.verdict == "equal" and row.timing is not None:
            by_backend[row.backend, row.timing.dtype].append(row)
    ranks = {}
    for group in by_backend.values():
        group.sort(key=lambda row: row.timing.median_s if row.timing else 0.0)
        for place, row in enumerate(group, start=1):
            ranks[id(row)] = place
    return [dataclasses.replace(row, rank=ranks.get(id(row))) for row in all_rows]


def csv_text(all_rows: Sequence[Row]) -> str:
    """The gradebook as CSV: a header, then a row a submission and kernel."""
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(COLUMNS)
    for row in all_rows:
        writer.writerow(row.cells())
    return text.getvalue()


def verdicts_csv(by_submission: Sequence[tuple[str, Records]]) -> str:
    """Every verdict at every shape (check.csv): the submission first."""
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(["submission", "backend", "variant", "M", "K", "N", "verdict", "detail"])
    for submission, found in by_submission:
        for v in found.verdicts:
            sizes = (v.shape.M, v.shape.K, v.shape.N) if v.shape else ("", "", "")
            writer.writerow([submission, v.label, v.variant, *sizes, v.word, v.detail])
    return text.getvalue()
