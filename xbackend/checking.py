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
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from xbackend import families
from xbackend.errors import KernelCompileError, XBackendError
from xbackend.operations import MM, Shape, make_operands
from xbackend.problems import Reference, check
from xbackend.sweep import DEFAULT_BASE, growth

if TYPE_CHECKING:
    from xbackend import Backend

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


def check_variant(
    label: str, backend: Backend, variant: str, shapes: Sequence[Shape], seed: int
) -> Iterator[Verdict]:
    """``variant`` at each of ``shapes``, at its default tile; a build error ends it."""
    spec = backend.variant_spec(variant)
    problem = backend.variant_problem(variant, np.dtype(np.float32))
    if problem:
        yield Verdict(label, variant, None, None, problem)
        return
    for shape in shapes:
        A, B = make_operands(shape, seed)
        try:
            result = backend.matmul(A, B, variant, spec.default_tile)
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
    backend: Backend, variant: str, shape: Shape, seed: int
) -> tuple[float | None, str]:
    """The median kernel time of ``variant`` at ``shape`` (its default tile), or None,
    and the clock that timed it ("globaltimer": the device span; else the API's)."""
    A, B = make_operands(shape, seed)
    try:
        measured = backend.measure(A, B, variant, samples=TIMED_SAMPLES, min_samples=5)
    except XBackendError:
        return None, ""
    kept, _ = measured.kept
    return (float(np.median(kept)) if kept else None), measured.clock


def schedule(steps: int) -> list[Shape]:
    """The assignment's sizes: A (16·i)×(14·i) · B (14·i)×(16·i), i = 1..steps (none: 0)."""
    return growth(DEFAULT_BASE, steps) if steps else []


def check_folders(
    opened: Sequence[tuple[str, Backend]],
    variants: Sequence[str],
    shapes: Sequence[Shape],
    seed: int,
    say: Callable[[Verdict], None] = lambda verdict: None,
) -> list[Verdict]:
    """Every variant on every opened backend that has it, at every shape."""
    found = []
    for label, backend in opened:
        for variant in variants:
            if variant not in backend.variants():
                continue
            for verdict in check_variant(label, backend, variant, shapes, seed):
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


def sanitize(folders: Sequence[str], oclgrind: str, seed: int) -> tuple[dict[str, Finding], str]:
    """Run the folders' kernels under oclgrind (a simulated OpenCL device that reports
    out-of-bounds accesses, data races and reads of uninitialized memory) at
    SANITIZED_SHAPES; each kernel's first report, and oclgrind's last words where it
    failed without one. Unoptimized builds: oclgrind 21.10 reads every access of them."""
    env = {**os.environ, "XBACKEND_OPENCL_OPTIONS": "-cl-opt-disable"}
    sizes = ",".join(f"{s.M}x{s.K}x{s.N}" for s in SANITIZED_SHAPES)
    command = [oclgrind, "--data-races", "--uninitialized", sys.executable, "-m", "xbackend",
               "check", *folders, "--backends", "opencl", "--steps", "0", "--shapes", sizes,
               "--seed", str(seed), "--no-times", "--sanitize", "off"]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    except subprocess.TimeoutExpired:
        return {}, "oclgrind took more than 10 minutes"
    findings = sanitizer_findings(done.stderr)
    failed = "" if findings or "checking" in done.stdout else done.stderr.strip()[-300:]
    return findings, failed
