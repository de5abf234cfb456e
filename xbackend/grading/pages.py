"""The gradebook as pages: one for the class, one a submission to hand back.

The class page has a row a submission and kernel (its verdict, where it fails, the
sanitizer's finding, its time and speed-ups), the names the submissions share, and the
ranking of the equal kernels; each submission's row links to its own page, which says
every verdict of its kernels, shape by shape where they failed, with what xbackend's own
kernels and the vendor's took on the same device. Every string from a submission is
escaped (``report.document``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Mapping, Sequence

from xbackend.grading.gradebook import Row, passed, rank_said
from xbackend.grading.records import Records, Timing, compact
from xbackend.measuring.timing import format_seconds
from xbackend.report.document import (
    Block,
    Cell,
    Heading,
    Paragraph,
    Sentences,
    Table,
    render_html,
)

_FLAGS = {"equal": "equal", "WRONG": "bad", "NOT RUN": "notrun", "compiles": ""}


def page_name(submission: str) -> str:
    """The file name of a submission's page, in the ``submissions`` folder (its records'
    folder is this without ``.html``): the name itself where it is a safe file name, else
    the name made safe and a digest of the name as it is, after a ``~`` no safe name
    holds, so that names alike once made safe (``zoë``, ``zoé``) never share a page. A
    name ending ``.html`` is made safe too: its records' folder would be another's page."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", submission)
    page_like = safe.lower().endswith(".html")
    if safe != submission or safe.startswith(".") or len(safe) > 100 or page_like:
        raw = submission.encode("utf-8", "surrogateescape")  # a name not UTF-8 as it came
        safe = f"{safe.lstrip('.')[:80]}~{hashlib.sha256(raw).hexdigest()[:10]}"
    return safe + ".html"


def said_time(timing: Timing | None) -> str:
    if timing is None:
        return ""
    return f"{format_seconds(timing.median_s)} ±{timing.spread:.1%}"


def _ratio(row: Row, key: str) -> str:
    value = row.speedups.get(key)
    return f"{value:.2f}×" if value is not None else ""


def _row_cells(row: Row, link: bool) -> list[Cell]:
    name = Cell(row.submission, link=f"submissions/{page_name(row.submission)}" if link else "")
    return [
        name, Cell(row.backend), Cell(row.variant), Cell(row.verdict, _FLAGS.get(row.verdict, "")),
        Cell(row.shapes, "wrap"), Cell(row.finding or row.detail, "wrap"),
        Cell(said_time(row.timing)), Cell(_ratio(row, "own naive")),
        Cell(_ratio(row, "xbackend tiled")), Cell(_ratio(row, "vendor")),
    ]  # fmt: skip


def _submission_cells(name: str, rows: Sequence[Row]) -> list[Cell]:
    """One submission in a row: its word, each kernel's words, what to fix first."""
    words = [r.verdict for r in rows]
    word = ("equal" if passed(words) else "WRONG" if "WRONG" in words
            else "compiles" if set(words) == {"compiles"} else "NOT RUN")  # fmt: skip
    kernels: dict[str, list[str]] = {}
    for row in rows:
        kernels.setdefault(row.variant, []).append(f"{row.backend} {row.verdict}")
    said = "; ".join(f"{variant}: {', '.join(words)}" for variant, words in kernels.items())
    bad = next((r for r in rows if r.verdict in ("WRONG", "NOT RUN")), None)
    fix = ""
    if bad is not None:  # a submission's own problem has no backend nor kernel ("-")
        where = f"{bad.backend} {bad.variant}: " if bad.variant != "-" else ""
        fix = f"{where}{bad.finding or bad.detail}"
    if word == "compiles":
        fix = "nothing ran: nvcc compiled it, and no CUDA device is here to run it"
    timed = [r for r in rows if r.verdict == "equal" and r.timing is not None]
    best = min(timed, key=lambda r: r.timing.median_s if r.timing else 0.0, default=None)
    fastest = f"{best.backend} {best.variant}: {said_time(best.timing)}" if best else ""
    link = f"submissions/{page_name(name)}"
    return [Cell(name, link=link), Cell(word, _FLAGS[word]), Cell(said, "wrap"),
            Cell(fix[:300], "wrap"), Cell(fastest)]  # fmt: skip


_HEADER = ["submission", "backend", "kernel", "verdict", "shapes", "why (first finding)",
           "median time ±95%", "speed-up: own naive", "xbackend tiled", "vendor"]  # fmt: skip


def class_page(
    rows: Sequence[Row], about: Sequence[str], shared: Sequence[str],
    references: Mapping[str, Timing], rank: bool,
) -> str:  # fmt: skip
    """The class's page."""
    submissions = list(dict.fromkeys(row.submission for row in rows))
    equal = sum(1 for s in submissions if passed([r.verdict for r in rows if r.submission == s]))
    blocks: list[Block] = [
        Heading("Gradebook", 1),
        Sentences(
            [*about, f"{equal} of {len(submissions)} submissions equal everywhere they ran."]
        ),
    ]
    if shared:
        blocks.append(Paragraph(
            "Names more than one submission declares (each submission is checked in a "
            "process of its own and named by its folder, so none is refused): " + "; ".join(shared)
        ))  # fmt: skip
    blocks += [
        Heading("Submissions", 2),
        Table(["submission", "verdict", "kernels", "first thing to fix", "fastest equal kernel"],
              [_submission_cells(name, [r for r in rows if r.submission == name])
               for name in submissions], numeric=False),
        Heading("Every kernel", 2),
        Table(_HEADER, [_row_cells(row, True) for row in rows], numeric=False),
    ]  # fmt: skip
    blocks += _references(references)
    if rank:
        blocks += _ranking(rows)
    return render_html("xbackend gradebook", blocks)


def _references(references: Mapping[str, Timing]) -> list[Block]:
    if not references:
        return []
    shape = next(iter(references.values())).shape
    rows = [[Cell(key), Cell(said_time(t)), Cell(t.clock)] for key, t in references.items()]
    return [
        Heading(f"xbackend's kernels and the vendor's at {compact(shape)}", 2),
        Table(["backend and kernel", "median time ±95%", "clock"], rows, numeric=False),
    ]  # fmt: skip


def rank_order(row: Row) -> tuple[str, str, int, float]:
    """Backend, element type, rank, then median time (within a shared rank): how a
    ranking is listed."""
    timing = row.timing
    return (row.backend, timing.dtype if timing else "", row.rank or 0,
            timing.median_s if timing else 0.0)  # fmt: skip


def _ranking(rows: Sequence[Row]) -> list[Block]:
    ranked = sorted((r for r in rows if r.rank), key=rank_order)
    body = [[Cell(rank_said(r)), Cell(r.backend), Cell(r.timing.dtype if r.timing else ""),
             Cell(r.submission), Cell(r.variant), Cell(said_time(r.timing)),
             Cell(_ratio(r, "vendor"))] for r in ranked]  # fmt: skip
    header = ["rank", "backend", "type", "submission", "kernel", "median time ±95%", "× vendor"]
    return [
        Heading("Ranking: the equal kernels by median time", 2),
        Paragraph(
            "Kernels whose 95% intervals overlap share a rank (3=): a kernel's rank is one "
            "more than the number of kernels surely faster, whose interval lies wholly below "
            "its own."
        ),
        Table(header, body),
    ]


def submission_page(
    name: str, folder: str, rows: Sequence[Row], found: Records, shapes: int,
    references: Mapping[str, Timing],
) -> str:  # fmt: skip
    """One submission's page: its kernels, then every verdict that was not equal. The
    page is the student's: the teacher's folders (``folder``, where the submission is)
    are said as the submission's name."""
    rows = [
        dataclasses.replace(row, finding=_theirs(row.finding, folder, name),
                            detail=_theirs(row.detail, folder, name))
        for row in rows
    ]  # fmt: skip
    blocks: list[Block] = [
        Heading(f"{name}: the check of its kernels", 1),
        Paragraph(
            f"Folder {name}; {shapes} shape{'s' if shapes != 1 else ''} a kernel (edge "
            "shapes, then the assignment's sizes), each against the float64 reference."
        ),
        Table(_HEADER[1:], [_row_cells(row, False)[1:] for row in rows], numeric=False),
    ]
    bad = [dataclasses.replace(v, detail=_theirs(v.detail, folder, name))
           for v in found.verdicts if v.equal is not True]  # fmt: skip
    if bad:
        body = [
            [Cell(v.label), Cell(v.variant),
             Cell(compact(v.shape)),
             Cell(v.word, _FLAGS.get(v.word, "")), Cell(v.detail, "wrap")]
            for v in bad
        ]  # fmt: skip
        blocks += [
            Heading("What to fix", 2),
            Table(["by", "kernel", "shape", "verdict", "detail"], body, numeric=False),
        ]
    blocks += _references(references)
    return render_html(f"{name}: xbackend check", blocks)


def _theirs(text: str, folder: str, name: str) -> str:
    """``text`` with the submission's folder said as its name (no path of the machine)."""
    return text.replace(folder, name) if folder else text
