"""One submission checked in this process (``check --one``): the process a class's check
starts for each submission, so that its families are the only user families here and a
crash of anything it runs is that submission's alone.

Its steps: the sanitizers first (oclgrind for the OpenCL kernels, compute-sanitizer for
the CUDA ones, where installed and where there is a device), each variant in a run of its
own; nvcc over the CUDA sources where no CUDA device is here to build them; then every
kernel safe to run natively, at every shape (in a process of their own again:
``Isolation``, so that one kernel's crash is not its twin's); then each kernel's time at
the largest size. Every verdict and time is appended to ``--records`` as it is reached.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import shutil
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from xbackend import families
from xbackend.backends.compiled import clock_mode
from xbackend.backends.execution import RED_ZONE_ENV
from xbackend.backends.machine_code import cuda_tool
from xbackend.cli.compare import open_backends
from xbackend.cli.exits import EXIT_USAGE
from xbackend.errors import XBackendError
from xbackend.grading import compilers, records
from xbackend.grading.checking import (
    check_variant,
    default_dtype,
    folder_variants,
    schedule,
    unrunnable,
    verified_timing,
)
from xbackend.grading.records import COMPILER, SANITIZERS, Verdict, compact, language_of
from xbackend.grading.sanitizers import CUDA_TOOLS, Sanitized, sanitize, sanitize_cuda
from xbackend.grading.sanitizers import SHAPES as SANITIZED_SHAPES
from xbackend.launches.kernels import extern_c
from xbackend.measuring.timing import format_seconds
from xbackend.operations import Shape
from xbackend.sweep.isolation import Isolation

EXIT_WRONG = 1  # a kernel wrong, or not run, at some shape
EXIT_NOTHING_CHECKED = EXIT_USAGE  # no kernel of the folders can run here: nothing passed


class Book:
    """Where this process's records go (``--records``; nowhere without it), and the
    verdicts kept for the summary."""

    def __init__(self, stream: IO[str] | None):
        self._stream = stream
        self.verdicts: list[Verdict] = []

    def add(self, record: Verdict | records.Timing | records.Described | None) -> None:
        if isinstance(record, Verdict):
            self.verdicts.append(record)
        if self._stream is not None:
            records.write(self._stream, record)


@contextlib.contextmanager
def _book(path: str | None) -> Iterator[Book]:
    if path is None:
        yield Book(None)
        return
    with Path(path).open("a", encoding="utf-8") as stream:
        yield Book(stream)


def run(args: argparse.Namespace, shapes: list[Any]) -> int:
    """Check the folders' kernels here; the exit status says how it went."""
    families.add_folders(args.folders)
    # A write past C's end is seen, here and in the kernels' process (not under a
    # sanitizer, which runs this with 0: it must see C's own end).
    os.environ.setdefault(RED_ZONE_ENV, "1")
    variants = _variants(args)
    with _book(args.records) as book:
        for each in variants:
            book.add(_described(each))
        opened = [
            (label, backend)
            for label, backend in open_backends(args.backends)
            if backend.kernel_language()
        ]
        try:
            if not opened:
                raise XBackendError("no CUDA or OpenCL backend here to run kernels on")
            status = _checked(args, book, opened, variants, shapes)
        finally:
            for _, backend in opened:
                backend.close()
        book.add(None)
    return status


def _variants(args: argparse.Namespace) -> list[str]:
    """The folders' variants of mm to check: every one, or those ``--variants`` names."""
    variants = folder_variants(args.folders)
    if not variants:
        raise XBackendError(f"{', '.join(args.folders)}: no variants of mm to check")
    if args.variants:
        unknown = [name for name in args.variants if name not in variants]
        if unknown:
            raise XBackendError(
                f"--variants: no variant {', '.join(unknown)} of mm in {', '.join(args.folders)} "
                f"(its variants: {', '.join(variants)})"
            )
        variants = [name for name in variants if name in args.variants]
    return variants


def _described(variant: str) -> records.Described:
    spec = families.find_variant(variant)
    family = families.family(spec.family)
    files = {language: path.name for language, path in family.sources.items()}
    return records.Described(variant, family.name, spec.kernel, files, default_dtype(spec))


def dtype_of(args: argparse.Namespace, variant: str) -> str:
    """The element type ``variant`` is checked in: ``--dtype``, else float32 where its
    family computes in it, else the first its manifest declares."""
    return str(args.dtype or _described(variant).dtype)


def _checked(
    args: argparse.Namespace, book: Book, opened: list[Any], variants: list[str],
    shapes: list[Any],
) -> int:  # fmt: skip
    """Every step, in order; the exit status."""
    labels = ", ".join(label for label, _ in opened) or "no device"
    print(f"checking {', '.join(variants)} on {labels}: {len(shapes)} shapes", flush=True)
    asked = [part.strip().split(":")[0] for part in args.backends.split(",")]
    if "auto" in asked or "cuda" in asked:  # a .cu file built where nothing here runs it
        for verdict in compilers.nvcc_verdicts(variants, opened, args.dtype):
            _say(verdict, book)
    missing = unrunnable(variants, opened)
    compiled = {v.variant for v in book.verdicts}
    if len(missing) == len(variants):  # nvcc's builds, at most: nothing ran
        shown = "; ".join(f"{variant}: {why}" for variant, why in missing.items())
        print(f"xbackend: error: nothing to check: {shown}", file=sys.stderr)
        for variant, why in missing.items():
            if variant not in compiled:
                book.add(Verdict("-", variant, None, None, why))
        _summary(book.verdicts, len(shapes))  # what nvcc said, where it built them
        return EXIT_NOTHING_CHECKED
    for variant, why in missing.items():
        if variant not in compiled:  # nvcc's verdict says more
            book.add(Verdict("-", variant, None, None, why))
    runnable = [v for v in variants if v not in missing]
    unsafe = _sanitized(args, book, opened, runnable)
    # Under a sanitizer (which runs this with C's red zone off) one run a shape, and the
    # first hang ends it: more would spend its deadline, and only its findings are read.
    sanitizing = os.environ.get(RED_ZONE_ENV) == "0"
    with Isolation() as isolation:
        for label, backend in opened:
            for variant in [v for v in runnable if v in backend.variants()]:
                if (label, variant) in unsafe:
                    continue
                dtype = dtype_of(args, variant)
                finding = _finding(book, backend.name, variant)
                checked = check_variant(
                    label, backend, variant, shapes, args.seed, isolation, dtype,
                    finding=finding, under_sanitizer=sanitizing,
                )  # fmt: skip
                for verdict in checked:
                    _say(verdict, book)
        if args.steps and not args.no_times:
            _times(args, book, opened, isolation)
    _summary(book.verdicts, len(shapes))
    if not book.verdicts:
        return EXIT_NOTHING_CHECKED
    return EXIT_WRONG if any(v.equal is not True for v in book.verdicts) else 0


def _sanitized(
    args: argparse.Namespace, book: Book, opened: list[Any], variants: list[str]
) -> set[tuple[str, str]]:
    """The sanitizers' verdicts, where they run (``--sanitize``: oclgrind for OpenCL,
    compute-sanitizer for CUDA), one run per variant: a report is a wrong kernel; one
    flagged for an access out of bounds, or whose run did not finish (a cap on reports,
    a crash, a timeout), is not run natively, said as a verdict of its own. The (backend,
    variant) pairs not to run natively."""
    unsafe = set()
    for label, backend in opened:
        tool = _tool(args, backend.name)
        if tool is None:
            continue
        mine = [v for v in variants if v in backend.variants()]
        print(f"{Path(tool).name}: the {backend.name} kernels at {len(SANITIZED_SHAPES)} "
              "small edge shapes first", flush=True)  # fmt: skip
        for variant in mine:
            source = families.family(backend.variant_spec(variant).family).sources
            file = source[backend.name]
            done = _sanitize(args, backend.name, tool, variant, file)
            name = SANITIZERS[backend.name]
            if done.finding is not None:
                _say(Verdict(name, variant, None, False, done.finding.said(file.name)), book)
            if done.skipped:  # it runs natively; what it was not checked for is said
                book.add(Verdict(name, variant, None, True, f"not sanitized: {done.skipped}"))
                print(f"  {name} {variant}: not sanitized: {done.skipped}", flush=True)
            if done.runs_natively:
                continue
            unsafe.add((label, variant))
            bounds = done.finding.out_of_bounds if done.finding else ""
            why = f"it {bounds} out of bounds under {name} (fix that first)" if bounds else ""
            why = why or f"{name} did not finish checking it ({done.unfinished})"
            _say(Verdict(label, variant, None, None, f"not run natively: {why}"), book)
    return unsafe


def _finding(book: Book, language: str, variant: str) -> str:
    """The sanitizer's finding on ``variant``'s kernel in ``language``, as a verdict's
    detail ends with it ("oclgrind: Read-write data race ..."), or ""."""
    tool = SANITIZERS.get(language)
    found = [v for v in book.verdicts if v.label == tool and v.variant == variant]
    return next((f"{tool}: {v.detail}" for v in found if v.equal is False), "")


def _tool(args: argparse.Namespace, language: str) -> str | None:
    """The sanitizer of ``language`` to run, or None (``--sanitize off``, or ``auto`` and
    not installed); ``--sanitize on`` without one is an error naming how to get it."""
    if args.sanitize == "off" or language not in SANITIZERS:
        return None
    name = SANITIZERS[language]
    found = cuda_tool(name) if language == "cuda" else shutil.which(name)
    if found is None and args.sanitize == "on" and language == "opencl":
        raise XBackendError("--sanitize on needs oclgrind (apt-get install oclgrind)")
    return found


def _sanitize(
    args: argparse.Namespace, language: str, tool: str, variant: str, file: Path
) -> Sanitized:
    """One variant under its language's sanitizer; a finding with the code of its line."""
    dtype = dtype_of(args, variant)
    text = file.read_text(errors="replace")
    if language == "opencl":
        done = sanitize(args.folders, variant, tool, args.seed, dtype)
    else:
        # The file's own line numbers: a stamped build (the device clock's: on NVIDIA,
        # unless XBACKEND_CLOCK=api) puts ``#line 1`` after what it adds first
        # (``with_hooks``); an unstamped one has ``extern "C" {`` first where the file
        # does not say it.
        shift = 0 if extern_c(text) or clock_mode() == "auto" else 1
        staged = bool(families.find_variant(variant).staged)  # racecheck: shared memory's
        tools = CUDA_TOOLS if staged else CUDA_TOOLS[:1]
        done = sanitize_cuda(args.folders, variant, tool, args.seed, dtype, shift, tools)
    lines = text.splitlines()
    finding = done.finding
    if finding is not None and not finding.code and 0 < finding.line <= len(lines):
        code = lines[finding.line - 1].strip()[:120]  # where the tool had no source to show
        return dataclasses.replace(done, finding=dataclasses.replace(finding, code=code))
    return done


def _say(verdict: Verdict, book: Book) -> None:
    book.add(verdict)
    if verdict.equal is not True:
        where = f" at {compact(verdict.shape)}" if verdict.shape is not None else ""
        print(f"  {verdict.label} {verdict.variant}{where}: {verdict.word} ({verdict.detail})",
              flush=True)  # fmt: skip


def _summary(verdicts: list[Verdict], shapes: int) -> None:
    """One line a kernel: equal everywhere, or the shapes where it is not."""
    by_kernel: dict[tuple[str, str], list[Verdict]] = defaultdict(list)
    for verdict in verdicts:
        by_kernel[language_of(verdict.label), verdict.variant].append(verdict)
    print()
    for (label, variant), found in by_kernel.items():
        print(f"{label} {variant}: {summary_of(found, shapes)}")


def summary_of(found: list[Verdict], shapes: int) -> str:
    """One kernel's verdicts in a few words: a sanitizer's or compiler's first, then the
    shapes: equal everywhere, or where it is not."""
    said = [_said(v) for v in found if v.shape is None]
    ran = [v for v in found if v.shape is not None]
    if ran:
        said.append(_shapes_said(ran, shapes))
    return "; ".join(said)


def _said(verdict: Verdict) -> str:
    """A verdict at no shape: a backend's ("NOT RUN (why)"), a sanitizer's ("WRONG under
    oclgrind (what, where)") or nvcc's (its build, in its words)."""
    if _native(verdict.label):
        return f"{verdict.word} ({verdict.detail})"
    if verdict.label == COMPILER:
        return (
            f"{verdict.word} ({verdict.detail})" if verdict.equal else f"NOT RUN: {verdict.detail}"
        )
    if verdict.equal:  # a sanitizer's "not sanitized: why": the kernel ran natively
        return verdict.detail
    return f"{verdict.word} under {verdict.label} ({verdict.detail})"


def _native(label: str) -> bool:
    """A verdict of a backend's own (or of none), not a sanitizer's or a compiler's."""
    return label.split(":")[0] not in (*SANITIZERS.values(), COMPILER)


def _shapes_said(ran: list[Verdict], shapes: int) -> str:
    """The shapes in words: where it hung or crashed (with what those shapes share), then
    equal or wrong at the others, then the shapes not run after its processes were lost
    (``checking.MOST_LOST``). A shape checked twice (the timed size: its timed runs are
    verified too) counts once, by its worse verdict."""
    worst: dict[Shape, Verdict] = {}
    for verdict in ran:
        shape = verdict.shape
        if shape is not None and (shape not in worst or worst[shape].equal is True):
            worst[shape] = verdict
    lost = {shape: how for shape, v in worst.items() if (how := _how_lost(v))}
    others = [v for shape, v in worst.items() if shape not in lost]
    said = []
    for how in dict.fromkeys(lost.values()):
        at = [shape for shape in lost if lost[shape] == how]
        where = shared(at, [v.shape for v in others if v.shape is not None])
        said.append(f"{how} at {where} ({_listed(at)})" if where else f"{how} at {_listed(at)}")
    bad = [v for v in others if v.equal is not True]
    among = f"the other {len(others)}" if lost else f"{len(others)} shapes"
    if others and not bad:
        said.append(f"equal at {among if lost else f'all {among}'}")
    elif bad:
        shown = _listed([v.shape for v in bad])
        said.append(f"{bad[0].word} at {len(bad)} of {among}: {shown} ({bad[0].detail})")
    if lost and len(worst) < shapes:
        processes = f"{len(lost)} lost process{'es' if len(lost) != 1 else ''}"
        said.append(f"{shapes - len(worst)} not run after {processes}")
    return "; ".join(said)


def _how_lost(verdict: Verdict) -> str:
    """ "hangs" or "crashes" where the kernel's process was lost at this shape, else ""."""
    if verdict.equal is not None or verdict.shape is None:
        return ""
    if verdict.detail.startswith("timed out"):
        return "hangs"
    return "crashes" if verdict.detail.startswith("the kernel's process") else ""


def _listed(shapes: list[Any]) -> str:
    return ", ".join(compact(s) for s in shapes[:6]) + (" ..." if len(shapes) > 6 else "")


def shared(chosen: list[Shape], others: list[Shape]) -> str:
    """What the ``chosen`` shapes have that the ``others`` do not, on one of M, N and K:
    one value (``K = 1``), or a bound (``K ≤ 3``, ``M ≥ 129``); "" where none tells."""
    if not others:
        return ""
    for name in ("K", "M", "N"):
        mine = [getattr(shape, name) for shape in chosen]
        theirs = [getattr(shape, name) for shape in others]
        if len(set(mine)) == 1 and mine[0] not in theirs:
            return f"{name} = {mine[0]}"
        if max(mine) < min(theirs):
            return f"{name} ≤ {max(mine)}"
        if min(mine) > max(theirs):
            return f"{name} ≥ {min(mine)}"
    return ""


def _times(args: argparse.Namespace, book: Book, opened: list[Any], isolation: Isolation) -> None:
    """Each kernel that was equal at every shape, timed at the largest size at the tile
    it was verified at; a timed run that is wrong is a WRONG verdict, not a time."""
    shape = schedule(args.steps)[-1]
    failed = {(v.label, v.variant) for v in book.verdicts if v.equal is not True}
    print(f"\nmedian kernel time at {compact(shape)}:", flush=True)
    for label, backend in opened:
        for variant in sorted({v.variant for v in book.verdicts if v.label == label}):
            if (label, variant) in failed:
                continue
            dtype = dtype_of(args, variant)
            tile = backend.variant_spec(variant).default_tile  # the tile it was verified at
            found = verified_timing(
                backend, variant, shape, args.seed, isolation, label, dtype, tile
            )
            if isinstance(found, Verdict):  # a timed run was wrong: no time, a verdict
                _say(found, book)
                continue
            if found is not None:
                book.add(found)
            there = f" at {compact(found.shape)}" if found and found.shape != shape else ""
            print(f"  {label:10s} {variant:20s} {said_time(found)}{there}", flush=True)


def said_time(found: records.Timing | None) -> str:
    """A median time with its interval: ``1.23 ms ±2.1% (globaltimer)``."""
    if found is None:
        return "not run"
    return (f"{format_seconds(found.median_s):>10s} ±{found.spread:.1%} ({found.clock}, "
            f"{found.samples} samples)")  # fmt: skip
