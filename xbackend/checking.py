"""``xbackend check``: a folder of kernels checked as a teacher would.

Every kernel of the folder's families runs at held-out edge shapes (1×1, primes, sizes
that are not multiples of the tile, K = 1, more tiles than fit one row of groups) and at
the assignment's sizes, on fresh seeded operands into a NaN-poisoned output, against the
float64 reference with its K-aware bound (``problems.check``). A kernel that does not
build, or fails at a launch, is one verdict with the reason; it does not stop the rest.
Beside the verdicts, each kernel's median time at the largest assignment size, with the
shipped naive and tiled kernels' on the same device.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from xbackend import families
from xbackend.configs import Config
from xbackend.errors import KernelCompileError, XBackendError
from xbackend.isolation import ChildError, Isolation, KernelCrashed, KernelTimeout
from xbackend.measure import in_process
from xbackend.operations import MM, Shape, make_operands
from xbackend.problems import Reference, check
from xbackend.sweep import DEFAULT_BASE, growth

if TYPE_CHECKING:
    from xbackend import Backend, Measurement

# Edge shapes (M, K, N) no tile divides: one element, primes, K = 1, a thin row and
# column, and more column tiles than 16 groups of 16.
EDGE_SHAPES = (
    Shape(1, 1, 1), Shape(7, 13, 5), Shape(31, 17, 29), Shape(33, 20, 17), Shape(40, 1, 24),
    Shape(1, 64, 97), Shape(97, 64, 1), Shape(129, 67, 271),
)  # fmt: skip
REFERENCE_VARIANTS = ("naive", "tiled")  # the shipped kernels a user's is timed beside
TIMED_SAMPLES = 10


@dataclasses.dataclass(frozen=True)
class Verdict:
    """One kernel at one shape: equal to the reference, wrong (and how), or not run."""

    label: str  # the backend, as --backends names it
    variant: str
    shape: Shape | None  # None: the kernel did not get as far as a shape
    equal: bool | None  # None: it did not run
    detail: str  # the largest error in bounds, NaNs, or why it did not run

    @property
    def word(self) -> str:
        return {True: "equal", False: "WRONG", None: "NOT RUN"}[self.equal]


def folder_variants(folders: Sequence[str]) -> list[str]:
    """The variants of the families in ``folders`` that compute the plain product, in
    their order."""
    wanted = [Path(folder).resolve() for folder in folders]
    return [
        spec.name
        for each in families.catalogue()
        if not each.shipped and any(each.folder.is_relative_to(w) for w in wanted)
        for op, spec in each.variants
        if op == MM.name
    ]


def _measured(
    isolation: Isolation | None, config: Config, A: np.ndarray, B: np.ndarray, **options: Any
) -> Measurement:
    """``config``'s product of A and B: in the isolation's process where it isolates the
    variant (a user's kernel: a hang or a crash is then an error here), else here."""
    measurer = isolation.measurer(config) if isolation is not None else None
    return (measurer or in_process)(config, A, B, **options)


def check_variant(
    label: str, backend: Backend, variant: str, shapes: Sequence[Shape], seed: int,
    isolation: Isolation | None = None,
) -> Iterator[Verdict]:  # fmt: skip
    """``variant`` at each of ``shapes``, at its default tile; a build error ends it, and so
    does a hang, a crash or any error of a user's kernel in the ``isolation``'s process
    (on a GPU a kernel's fault is an error there, not a signal, and leaves its device
    unusable)."""
    spec = backend.variant_spec(variant)
    problem = backend.variant_problem(variant, np.dtype(np.float32))
    if not problem and spec.default_tile is not None:  # a size of its manifest's that
        problem = spec.expression_problem(spec.default_tile)  # has no value at its tile
    if problem:
        yield Verdict(label, variant, None, None, problem)
        return
    for shape in shapes:
        A, B = make_operands(shape, seed)
        try:
            config = Config(label, backend, MM.name, variant, spec.default_tile, "float32")
            result = _measured(isolation, config, A, B, warmup=0, samples=0).result
        except (KernelTimeout, KernelCrashed, ChildError) as error:  # its process went
            yield Verdict(label, variant, shape, None, str(error).splitlines()[0])
            return  # wrong: the larger shapes are not run
        except KernelCompileError as error:  # the compiler's own words, not just "failed"
            said = [line.strip() for line in error.log.splitlines() if "error" in line.lower()]
            first = str(error).splitlines()[0]
            yield Verdict(label, variant, shape, None, "; ".join([first, *said[:3]]))
            return
        except XBackendError as error:
            yield Verdict(label, variant, shape, None, str(error).splitlines()[0])
            continue
        found = check(result, Reference.of(A, B))
        detail = (
            f"{found.nan_count} elements NaN or unwritten"
            if found.nan_count
            else f"largest error {found.bound_ratio:.2g}× its bound"
        )
        yield Verdict(label, variant, shape, found.equal, detail)


def median_time_s(
    backend: Backend, variant: str, shape: Shape, seed: int,
    isolation: Isolation | None = None, label: str = "",
) -> tuple[float | None, str]:  # fmt: skip
    """The median kernel time of ``variant`` at ``shape`` (its default tile), or None,
    and the clock that timed it ("globaltimer": the device span; else the API's); a
    user's kernel in the ``isolation``'s process."""
    A, B = make_operands(shape, seed)
    config = Config(label, backend, MM.name, variant, None, "float32")
    try:
        measured = _measured(isolation, config, A, B, samples=TIMED_SAMPLES, min_samples=5)
    except XBackendError:
        return None, ""
    kept, _ = measured.kept
    return (float(np.median(kept)) if kept else None), measured.clock


def unrunnable(variants: Sequence[str], opened: Sequence[tuple[str, Backend]]) -> dict[str, str]:
    """The variants no opened backend runs, each with why: its family has no source in the
    languages of the backends here."""
    found = {}
    for variant in variants:
        if any(variant in backend.variants() for _, backend in opened):
            continue
        spec = next(
            s for each in families.catalogue() for _, s in each.variants if s.name == variant
        )
        languages = ", ".join(families.family(spec.family).sources) or "none"
        here = ", ".join(label for label, _ in opened) or "none"
        found[variant] = f"no backend here runs it (its kernels are {languages}; here: {here})"
    return found


def check_bytes(shape: Shape) -> int:
    """The host memory one check at ``shape`` takes, about: the float32 operands and
    result, and their float64 copies for the reference."""
    return 12 * (shape.M * shape.K + shape.K * shape.N + shape.M * shape.N)


def host_memory_bytes() -> int:
    """This machine's memory (8 GiB where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def schedule(steps: int) -> list[Shape]:
    """The assignment's sizes: A (16·i)×(14·i) · B (14·i)×(16·i), i = 1..steps (none: 0)."""
    return growth(DEFAULT_BASE, steps) if steps else []


def check_folders(
    opened: Sequence[tuple[str, Backend]],
    variants: Sequence[str],
    shapes: Sequence[Shape],
    seed: int,
    say: Callable[[Verdict], None] = lambda verdict: None,
    isolation: Isolation | None = None,
) -> list[Verdict]:
    """Every variant on every opened backend that has it, at every shape (a user's kernel
    in the ``isolation``'s process, where one is given)."""
    found = []
    for label, backend in opened:
        for variant in variants:
            if variant not in backend.variants():
                continue
            for verdict in check_variant(label, backend, variant, shapes, seed, isolation):
                say(verdict)
                found.append(verdict)
    return found


# oclgrind's report of one access: what it was, the kernel, and the line of the source.
_SANITIZER = re.compile(
    r"^(?P<what>(?:Invalid|Uninitialized|Possible|[\w-]+ data race)[^\n]*)\n"
    r"\tKernel: (?P<kernel>\w+)\n(?:\t[^\n]*\n)*?"
    r"\tAt line (?P<line>\d+) \(column \d+\) of input\.cl:\n\t  (?P<code>[^\n]*)",
    re.MULTILINE,
)
SANITIZED_SHAPES = (Shape(7, 13, 5), Shape(33, 20, 17))  # every edge guard, K past a tile


@dataclasses.dataclass(frozen=True)
class Finding:
    """oclgrind's first report of a kernel (what it was, at which line of its file), and
    whether any of its reports was a write out of bounds."""

    kernel: str
    what: str  # "Invalid read of size 4 (global)"
    line: int
    code: str  # the line's source, "" where oclgrind had none
    writes_out_of_bounds: bool = False


def sanitizer_findings(log: str) -> dict[str, Finding]:
    """Each kernel's first report in oclgrind's output."""
    found: dict[str, Finding] = {}
    writes: set[str] = set()
    for match in _SANITIZER.finditer(log):
        what = re.sub(r" at (global|local|private) memory address 0x[0-9a-f]+", r" (\1)",
                      match["what"])  # fmt: skip
        kernel, code = match["kernel"], match["code"].strip()
        code = "" if code == "(source not available)" else code
        found.setdefault(kernel, Finding(kernel, what, int(match["line"]), code))
        if what.startswith("Invalid write"):
            writes.add(kernel)
    return {
        kernel: dataclasses.replace(finding, writes_out_of_bounds=kernel in writes)
        for kernel, finding in found.items()
    }


SANITIZER_TIMEOUT_S = 300  # one variant's run under oclgrind (seconds)
_CAPPED = "errors generated - suppressing further errors"  # oclgrind at --max-errors


@dataclasses.dataclass(frozen=True)
class Sanitized:
    """oclgrind's word on one variant: its first report, if any, and why oclgrind did not
    finish checking it ("" where it did: then no report means no fault at those shapes)."""

    finding: Finding | None
    unfinished: str = ""


def sanitize(
    folders: Sequence[str],
    variant: str,
    oclgrind: str,
    seed: int,
    timeout_s: float = SANITIZER_TIMEOUT_S,
) -> Sanitized:
    """Run one variant of the folders under oclgrind (a simulated OpenCL device that
    reports out-of-bounds accesses, data races and reads of uninitialized memory) at
    SANITIZED_SHAPES. One run per variant: its reports are its own, whatever the other
    families name their kernels, and oclgrind's cap on reports or a crash ends one
    variant's check, never lets another's pass unread. Done means the run wrote its
    verdicts (``check.csv``) with no report cut off. Unoptimized builds: oclgrind 21.10
    reads every access of them."""
    env = {**os.environ, "XBACKEND_OPENCL_OPTIONS": "-cl-opt-disable"}
    sizes = ",".join(f"{s.M}x{s.K}x{s.N}" for s in SANITIZED_SHAPES)
    with tempfile.TemporaryDirectory(prefix="xbackend-oclgrind-") as out:
        command = [oclgrind, "--data-races", "--uninitialized", sys.executable, "-m",
                   "xbackend", "check", *folders, "--variants", variant, "--backends", "opencl",
                   "--steps", "0", "--shapes", sizes, "--seed", str(seed), "--no-times",
                   "--sanitize", "off", "--out", out]  # fmt: skip
        try:
            done = subprocess.run(command, capture_output=True, text=True, env=env,
                                  timeout=timeout_s)  # fmt: skip
        except subprocess.TimeoutExpired as expired:
            log = expired.stderr or ""
            log = log.decode(errors="replace") if isinstance(log, bytes) else log
            return Sanitized(_first(log), f"oclgrind took more than {timeout_s:g} s")
        finished = (Path(out) / "check.csv").is_file()
    finding = _first(done.stderr)
    if _CAPPED in done.stderr:
        return Sanitized(finding, "oclgrind stopped reporting at its cap of errors")
    if not finished:
        said = done.stderr.strip().splitlines()[-1:] or ["nothing"]
        return Sanitized(finding, f"oclgrind ended early (exit {done.returncode}): {said[0][:200]}")
    return Sanitized(finding)


def _first(log: str) -> Finding | None:
    """The first report in oclgrind's output (any write out of bounds flagged on it)."""
    found = list(sanitizer_findings(log).values())
    if not found:
        return None
    writes = any(each.writes_out_of_bounds for each in found)
    return dataclasses.replace(found[0], writes_out_of_bounds=writes)
