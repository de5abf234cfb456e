"""``xbackend check DIR...``: a submission, or a class of them, checked as a teacher would.

Every submission (a folder with a ``family.toml``; a folder of them is a class) is checked
in a process of its own (``check --one``, ``cli/check_submission.py``): its kernels at
edge shapes and the assignment's sizes, under the sanitizers first, then timed at the
largest size. This process measures xbackend's naive and tiled kernels and the vendor's
once, for the speed-ups, then writes the gradebook (``--out``) after each submission:
an interrupted class keeps every submission it finished.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import xbackend.cli.arguments as arguments
from xbackend.cli import check_submission
from xbackend.cli.check_submission import EXIT_NOTHING_CHECKED, EXIT_WRONG, summary_of
from xbackend.cli.compare import open_backends
from xbackend.errors import XBackendError
from xbackend.grading import classroom, gradebook, pages, submissions
from xbackend.grading.checking import (
    EDGE_SHAPES,
    check_bytes,
    host_memory_bytes,
    schedule,
    timing,
)
from xbackend.grading.classroom import Checked
from xbackend.grading.gradebook import REFERENCES, Row
from xbackend.grading.records import Timing
from xbackend.safeio import UnsafePath, atomic_write, output_folder, printable, refuse_link
from xbackend.sweep.isolation import TIMEOUT_ENV

# A kernel step of a check (its build and first run at a shape of at most 608×532, or one
# timed sample) takes well under a second on a CPU; past this it is a hang.
CHECK_KERNEL_TIMEOUT_S = 60.0


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "check",
        help="check your own kernels, or a class's, at edge shapes and the assignment's sizes",
        description="Check each submission (a folder with a family.toml beside its .cu/.cl "
        "files; a folder of such folders is a class: docs/grading.md) in a process of its "
        "own: its OpenCL kernels under oclgrind, its CUDA kernels built by nvcc where no "
        "GPU is here, then every kernel at held-out edge shapes (1×1, primes, sizes no tile "
        "divides, K = 1) and the assignment's sizes against the float64 reference, and its "
        "median time at the largest size beside xbackend's naive and tiled kernels and the "
        "vendor's. A crash, a hang or a corrupted heap is that submission's verdict. With "
        "--out (a class: results/check-TIME by default) a gradebook is written after each "
        f"submission. Exit status {EXIT_WRONG} if any kernel is wrong or does not run at "
        f"some shape; {EXIT_NOTHING_CHECKED} if nothing could be checked or the input is bad.",
        epilog="examples:\n  xbackend check examples/assignment/student\n"
        "  xbackend check examples/class --rank --out grades",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("folders", nargs="+", metavar="DIR",
                        help="a submission's folder, or a class: a folder of them")  # fmt: skip
    parser.add_argument(
        "--variants", type=arguments.names("variant"), default=None, metavar="LIST",
        help="only these variants of the folders, comma-separated (default: every one)",
    )  # fmt: skip
    parser.add_argument(
        "--backends", default="auto", metavar="LIST",
        help="cuda, opencl (or NAME:DEVICE), comma-separated; 'auto' (default): each available",
    )  # fmt: skip
    parser.add_argument(
        "--steps", type=arguments.bounded_int(0, 1000), default=38,
        help="assignment sizes to check, i = 1..STEPS (default 38: up to 608×532)",
    )  # fmt: skip
    parser.add_argument(
        "--shapes", type=arguments.shapes, default=None, metavar="LIST",
        help="MxKxN sizes to check instead of the edge shapes, comma-separated",
    )  # fmt: skip
    parser.add_argument(
        "--dtype", choices=("float32", "float64"), default=None,
        help="the element type (default: float32 where a family computes in it, else the "
        "first its manifest declares)",
    )  # fmt: skip
    parser.add_argument(
        "--sanitize", choices=("auto", "on", "off"), default="auto",
        help="first run the OpenCL kernels under oclgrind at two small edge shapes (out-of-"
        "bounds accesses, data races, uninitialized reads), one run a kernel; a kernel it "
        "flags for an access out of bounds, or does not finish, is not run natively. auto "
        "(default): where oclgrind is installed",
    )  # fmt: skip
    _add_output_options(parser)
    parser.set_defaults(func=run)


def _add_output_options(parser: argparse.ArgumentParser) -> None:
    """The times, the gradebook, the deadlines, and the options of a submission's own
    process (hidden: the class's process gives them)."""
    parser.add_argument("--no-times", action="store_true", help="leave out the timed runs")
    parser.add_argument("--seed", type=arguments.bounded_int(0, arguments.MAX_SEED), default=0)
    parser.add_argument(
        "--out", default=None, metavar="DIR",
        help="write the gradebook here: gradebook.csv and .html, a page a submission, "
        "check.csv (every verdict); a class's default: results/check-TIME",
    )  # fmt: skip
    parser.add_argument(
        "--merge", action="store_true",
        help="check into an --out holding an earlier check's gradebook: these submissions' "
        "rows, pages and records replace their own there, every other one is kept (a "
        "resubmission); without it such an --out is refused",
    )  # fmt: skip
    parser.add_argument(
        "--rank",
        action="store_true",
        help="rank the equal kernels by median time (printed and on the page)",
    )
    parser.add_argument(
        "--submission-timeout", type=float, default=classroom.DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help="end a submission's check after this long (default 1800; each kernel step "
        "has its own deadline, XBACKEND_KERNEL_TIMEOUT)",
    )  # fmt: skip
    parser.add_argument(
        "--jobs", type=arguments.bounded_int(1, 256), default=1, metavar="N",
        help="check N submissions at once (default 1). Their verdicts are the same; their "
        "times are taken side by side on one device, so compare times of a --jobs 1 check",
    )  # fmt: skip
    parser.add_argument(
        "--kernel-timeout", type=arguments.positive(float), default=None, metavar="SECONDS",
        help="end a kernel whose build and first runs, or one timed sample, take longer "
        f"(default {CHECK_KERNEL_TIMEOUT_S:g}, or XBACKEND_KERNEL_TIMEOUT): a hang's verdict",
    )  # fmt: skip
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--records", default=None, help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    if args.kernel_timeout is not None:  # the submissions' processes read it
        os.environ[TIMEOUT_ENV] = repr(args.kernel_timeout)
    elif not os.environ.get(TIMEOUT_ENV, "").strip():
        os.environ[TIMEOUT_ENV] = repr(CHECK_KERNEL_TIMEOUT_S)
    shapes = list(args.shapes) if args.shapes else [*EDGE_SHAPES, *schedule(args.steps)]
    _check_shapes(shapes)
    if args.one:  # one submission, here: the process a class's check starts for it
        return check_submission.run(args, shapes)
    found, skipped = submissions.gather(args.folders)
    out = _out_folder(args.out, len(found) > 1, args.merge)  # said before anything runs
    if out is not None:
        _refuse_links(out, found)
    earlier = _kept(out, [s.name for s in found]) if out is not None else None
    shared = submissions.shared_names(found)
    if len(found) > 1:
        print(f"checking a class of {len(found)} submissions, each in a process of its own")
    if shared:
        print("names more than one submission declares, each checked on its own and "
              f"named by its folder: {'; '.join(shared)}")  # fmt: skip
    for sentence in skipped:
        print(sentence)
    references = {} if args.no_times or not args.steps else _references(args)
    book = _Book(out, shared, references, len(shapes), args.rank, [s.name for s in found], earlier)
    book.jobs = args.jobs
    book.notes += skipped
    book.timed = not args.no_times and args.steps > 0
    if book.timed:
        book.notes.append(gradebook.times_sentence(schedule(args.steps)[-1], args.jobs))
    elif args.jobs > 1 and len(found) > 1:  # no times: the verdicts alone, side by side
        book.notes.append(f"{args.jobs} submissions checked at once")
    with tempfile.TemporaryDirectory(prefix="xbackend-check-") as scratch:
        kept = out or Path(scratch)  # the records: the gradebook's folder's, else for now
        folders = [kept / "submissions" / pages.page_name(s.name)[: -len(".html")] for s in found]
        checking = classroom.check_all(
            found, _forwarded(args), folders, args.submission_timeout, len(found) > 1, args.jobs
        )
        for number, checked in enumerate(checking, start=1):
            book.add(checked)
            if len(found) > 1:
                _progress(number, len(found), checked, len(shapes))
    book.finish()
    if len(found) == 1 and book.checked[0].exit == EXIT_NOTHING_CHECKED:
        return EXIT_NOTHING_CHECKED  # its own words said why
    if not any(c.records.verdicts for c in book.checked):
        return EXIT_NOTHING_CHECKED
    return EXIT_WRONG if book.wrong() else 0


def _check_shapes(shapes: list[Any]) -> None:
    """A shape whose check would not fit this machine's memory is refused by name."""
    limit = host_memory_bytes() // 2
    for shape in shapes:
        if check_bytes(shape) > limit:
            raise XBackendError(
                f"--shapes {shape.M}x{shape.K}x{shape.N}: checking it takes about "
                f"{check_bytes(shape) / 1e9:.3g} GB of host memory, over half of this "
                f"machine's {host_memory_bytes() / 1e9:.3g} GB"
            )


def _out_folder(out: str | None, is_class: bool, merge: bool) -> Path | None:
    """Where the gradebook goes, checked now (a folder that cannot be one, a link at one
    of its files, another check's gradebook without ``--merge``, is an error before
    anything runs); a class's default is results/check-TIME."""
    if out is None and not is_class:
        return None
    path = output_folder(Path(out) if out else arguments.fresh_out("check"))
    for name in ("gradebook.csv", "gradebook.html", "check.csv"):
        refuse_link(path / name)
    used = [name for name in ("gradebook.csv", "check.csv") if (path / name).exists()]
    if used and not merge:
        raise XBackendError(
            f"--out {path}: holds the gradebook of another check ({used[0]}); check into a "
            "new folder, or add --merge to replace only these submissions' rows, pages and "
            "records in it"
        )
    return path


def _refuse_links(out: Path, found: Sequence[submissions.Submission]) -> None:
    """A link at the submissions' folder, at a submission's folder or at a file written
    there (its page, log, records) is refused now: a check never writes through one."""
    top = out / "submissions"
    _refuse_folder_link(top)
    for each in found:
        stem = pages.page_name(each.name)[: -len(".html")]
        _refuse_folder_link(top / stem)
        for path in (top / f"{stem}.html", top / stem / "check.log", top / stem / "records.jsonl"):
            refuse_link(path)


def _refuse_folder_link(path: Path) -> None:
    if path.is_symlink():
        raise UnsafePath(f"{path} is a symbolic link; xbackend does not write through links")
    if path.exists() and not path.is_dir():
        raise UnsafePath(f"{path} exists and is not a folder")


def _kept(out: Path, names: Sequence[str]) -> gradebook.Kept:
    """What an earlier check wrote into ``out`` of the submissions other than ``names``:
    kept as it was by ``--merge`` (nothing where ``out`` holds no gradebook)."""
    book, every = out / "gradebook.csv", out / "check.csv"
    rows = gradebook.read_rows(book.read_text(encoding="utf-8")) if book.exists() else []
    lines = gradebook.read_verdicts(every.read_text(encoding="utf-8")) if every.exists() else []
    order = list(dict.fromkeys(row.submission for row in rows))
    mine = set(names)
    return gradebook.Kept(
        [row for row in rows if row.submission not in mine],
        [line for line in lines if line[0] not in mine],
        order,
    )


def _forwarded(args: argparse.Namespace) -> list[str]:
    """The options a submission's own check takes from this one."""
    found = ["--backends", args.backends, "--steps", str(args.steps), "--seed", str(args.seed),
             "--sanitize", args.sanitize]  # fmt: skip
    if args.variants:
        found += ["--variants", ",".join(args.variants)]
    if args.shapes:
        found += ["--shapes", ",".join(f"{s.M}x{s.K}x{s.N}" for s in args.shapes)]
    if args.dtype:
        found += ["--dtype", args.dtype]
    if args.no_times:
        found.append("--no-times")
    return found


def _references(args: argparse.Namespace) -> dict[str, Timing]:
    """xbackend's naive and tiled kernels and the vendor's, timed once at the largest
    size on each backend a submission runs on (trusted kernels: in this process)."""
    shape = schedule(args.steps)[-1]
    dtype = args.dtype or "float32"
    found: dict[str, Timing] = {}
    opened = [(label, backend) for label, backend in open_backends(args.backends)
              if backend.kernel_language()]  # fmt: skip
    try:
        for label, backend in opened:
            for variant in REFERENCES:
                if variant in backend.variants():
                    timed = timing(backend, variant, shape, args.seed, None, label, dtype)
                    if timed is not None:
                        found[f"{label} {variant}"] = timed
    finally:
        for _, backend in opened:
            backend.close()
    return found


def _progress(number: int, count: int, checked: Checked, shapes: int) -> None:
    """One line a submission, and one a kernel under it (each backend's words on it)."""
    how = f", {checked.ended}" if checked.ended else ""
    print(f"[{number}/{count}] {checked.submission.name} ({checked.seconds:.0f} s{how})")
    by_variant: dict[str, list[str]] = {}
    for row in gradebook.rows(checked.submission.name, checked.records, {}, shapes):
        said = summary_of(list(row.verdicts), shapes)
        where = f"{row.backend}: " if row.variant != "-" else ""  # the submission's own
        by_variant.setdefault(row.variant, []).append(f"{where}{said}")
    for variant, words in by_variant.items():
        head = f"{variant}: " if variant != "-" else ""
        print(printable(f"    {head}{' · '.join(words)}"[:300]))  # a kernel's words: data


class _Book:
    """The gradebook as it grows: written whole after each submission (``--out``)."""

    def __init__(
        self, out: Path | None, shared: Sequence[str], references: dict[str, Timing],
        shapes: int, rank: bool, order: Sequence[str], kept: gradebook.Kept | None = None,
    ):  # fmt: skip
        self.out, self.shared, self.references = out, shared, references
        self.shapes, self.rank = shapes, rank
        self.kept = kept or gradebook.Kept([], [], [])  # an earlier check's (--merge)
        # The class's order: an earlier check's first, a resubmission where it was.
        names = dict.fromkeys([*self.kept.order, *order])
        self.order = {name: index for index, name in enumerate(names)}
        self.notes: list[str] = []  # said on the class's page
        self.timed = False  # whether kernels are timed: the host's load is said then
        self.jobs = 1  # submissions checked at once (--jobs)
        if self.kept.order:
            again = ", ".join(order[:8]) + (" ..." if len(order) > 8 else "")
            self.notes.append(
                f"{again} re-checked {time.strftime('%Y-%m-%d %H:%M')} and merged into "
                "this gradebook (--merge): the other rows are an earlier check's"
            )
        self.checked: list[Checked] = []
        self.rows: list[Row] = list(self.kept.rows)

    def add(self, checked: Checked) -> None:
        self.checked.append(checked)
        self.checked.sort(key=lambda c: self.order.get(c.submission.name, 0))
        mine = gradebook.rows(checked.submission.name, checked.records, self.references,
                              self.shapes)  # fmt: skip
        ordered = sorted([*self.rows, *mine], key=lambda r: self.order.get(r.submission, 0))
        self.rows = gradebook.ranked(ordered)
        self._write(checked)

    def wrong(self) -> bool:
        """Any kernel wrong or not run, or a submission nothing here ran."""
        return len(self.good()) < len(self.checked)

    def good(self) -> list[str]:
        """The submissions equal everywhere they ran, and run somewhere (a kernel nvcc
        built for no device here is neither)."""
        return [
            c.submission.name for c in self.checked
            if gradebook.passed([r.verdict for r in self.rows if r.submission == c.submission.name])
        ]  # fmt: skip

    def _write(self, checked: Checked) -> None:
        if self.out is None:
            return
        about = [f"checked {time.strftime('%Y-%m-%d %H:%M')} by xbackend check, "
                 f"{self.shapes} shape{'s' if self.shapes != 1 else ''} a kernel",
                 *self.notes, *filter(None, [self.host()])]  # fmt: skip
        name = checked.submission.name
        mine = [row for row in self.rows if row.submission == name]
        everyone = [(c.submission.name, c.records) for c in self.checked]
        files = {
            f"submissions/{pages.page_name(name)}": pages.submission_page(
                name,
                str(checked.submission.folder),
                mine,
                checked.records,
                self.shapes,
                self.references,
            ),
            "gradebook.csv": gradebook.csv_text(self.rows),
            "check.csv": gradebook.verdicts_csv(everyone, self.kept.verdicts, self.order),
            "gradebook.html": pages.class_page(
                self.rows, about, self.shared, self.references, self.rank
            ),
        }
        for name, text in files.items():
            try:
                (self.out / name).parent.mkdir(parents=True, exist_ok=True)
                # A detail may quote a path not in UTF-8: written escaped, never refused.
                atomic_write(self.out / name, text.encode("utf-8", "backslashreplace"))
            except (UnsafePath, OSError) as error:
                print(f"xbackend: error: {self.out / name}: {error}", file=sys.stderr)

    def host(self) -> str | None:
        """The host's load while the submissions were checked, where it was busy and
        times were taken (the verdicts do not depend on it)."""
        if not self.timed:
            return None
        loads = [(c.submission.name, c.others_cores) for c in self.checked]
        return gradebook.host_sentence(loads, self.jobs)

    def finish(self) -> None:
        """The summary: the references' times, each kernel's verdict, the ranking."""
        if self.references:
            print("\nmedian kernel time, xbackend's kernels and the vendor's:")
            for key, timed in self.references.items():
                print(f"  {key:26s} {pages.said_time(timed)} ({timed.clock})")
        if len(self.checked) == 1 and self.rows and any(r.timing for r in self.rows):
            self._speedups()
        if self.rank:
            self._ranking()
        if len(self.checked) > 1:
            good = len(self.good())
            print(f"\n{good} of {len(self.checked)} submissions equal everywhere they ran")
        if self.host():
            print(f"\n{self.host()}")
        if self.out is not None:
            print(f"\ngradebook: {self.out / 'gradebook.html'} ({self.out / 'gradebook.csv'}; "
                  f"every verdict: {self.out / 'check.csv'})")  # fmt: skip

    def _speedups(self) -> None:
        print("speed-ups (the other kernel's median over this one's: above 1, this one is faster):")
        name = self.checked[0].submission.name
        for row in (r for r in self.rows if r.submission == name):
            said = ", ".join(f"{value:.2f}× {key}" for key, value in row.speedups.items())
            if said:
                print(f"  {row.backend} {row.variant}: {said}")

    def _ranking(self) -> None:
        ranked = sorted((r for r in self.rows if r.rank), key=pages.rank_order)
        print("\nranking of the equal kernels by median time:")
        for row in ranked:
            dtype = row.timing.dtype if row.timing else ""
            rank = gradebook.rank_said(row) + "."
            print(f"  {rank:5s} {row.backend:8s} {dtype:8s} {row.submission:16s} "
                  f"{row.variant:22s} {pages.said_time(row.timing)}")  # fmt: skip
        if not ranked:
            print("  none: no kernel was equal everywhere and timed")
