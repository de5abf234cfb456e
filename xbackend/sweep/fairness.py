"""Fair by construction: each configuration two backends both run, audited as planned.

A ratio of two APIs' times means what it says only where they ran the same thing the same
way. For each (operation, variant, tile, element type) two compiled backends both run,
``audits`` plans the product on each at one shape (planning only: nothing is allocated on
a device) and compares what would run: which kernels (a library's GEMM,
or a family's kernel by name), each launch's grid and block, its build options beyond the
language's own, and the clock that would time it. The verdict is FAIR, or UNFAIR with
every reason; the kind says what a ratio of the two compares: kernel against kernel (the
twins of one family), kernel against vendor, or vendor against vendor (each API's library).

Beside the verdict, what the compilers made of each pair of twin kernels
(``backends/machine_code.py``): registers, spills and shared memory, and the hot loop's
instructions where a disassembler is installed. A difference there is not UNFAIR: it is
part of what a ratio of two APIs compares (their compilers), and the audit says it.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from xbackend.backends.machine_code import differences
from xbackend.errors import XBackendError
from xbackend.launches.kernels import STAMP, source_digest
from xbackend.launches.launch import KernelLaunch, Product
from xbackend.operations import Shape, operation
from xbackend.problems import make_operands
from xbackend.results.plan import Plan
from xbackend.safeio import atomic_write, read_small_text
from xbackend.sweep.configs import configs

# Options one language needs and its twin does not: not a difference between the kernels.
_LANGUAGE_OPTIONS = ("-DXB_FP64", "-cl-", "-I", "--", "-arch", "-lineinfo")


@dataclasses.dataclass(frozen=True)
class Audit:
    """One configuration as two backends would run it, compared."""

    op: str
    variant: str
    tile: int | None
    dtype: str
    shape: Shape
    first: str  # the backends' labels
    second: str
    kind: str  # "kernel against kernel", "kernel against vendor", "vendor against vendor"
    reasons: tuple[str, ...]  # empty: FAIR
    # What each pair of twin kernels compiled to, or why it was not read (machine_code.py).
    compiled: tuple[str, ...] = ()
    # The digests of the two sides' kernel files (their last kernel's), "" for a library.
    digests: tuple[str, str] = ("", "")

    @property
    def verdict(self) -> str:
        return "UNFAIR" if self.reasons else "FAIR"

    def line(self) -> str:
        tile = f" T={self.tile}" if self.tile else ""
        what = f"{self.op} {self.variant}{tile} {self.dtype}"
        why = f": {'; '.join(self.reasons)}" if self.reasons else ""
        return f"{what}, {self.second} against {self.first} ({self.kind}): {self.verdict}{why}"


def _options(launch: KernelLaunch) -> set[str]:
    return {o for o in launch.options if o != STAMP and not o.startswith(_LANGUAGE_OPTIONS)}


def _geometry(launch: KernelLaunch) -> str:
    axes = 2 if launch.dims == 3 and launch.grid[2] == launch.block[2] == 1 else launch.dims
    grid = "×".join(map(str, launch.grid[:axes]))
    block = "×".join(map(str, launch.block[:axes]))
    return f"{grid} groups of {block}"


def compared(first: tuple[str, Product, str], second: tuple[str, Product, str]) -> tuple[str, ...]:
    """Why two planned products (label, product, clock) do not run the same way."""
    (a, one, clock_a), (b, other, clock_b) = first, second
    kernels = [_kernels(p) for p in (one, other)]
    reasons = []
    if len(one.steps) != len(other.steps):
        reasons.append(f"{a} runs {len(one.steps)} steps, {b} {len(other.steps)}")
    for x, y in zip(*kernels, strict=False):
        if (x.family, x.function) != (y.family, y.function):
            reasons.append(f"different kernels: {x.family}/{x.function} against "
                           f"{y.family}/{y.function}")  # fmt: skip
            continue
        if (x.grid, x.block) != (y.grid, y.block):
            reasons.append(f"{x.function} launched as {_geometry(x)} in {a}, {_geometry(y)} in {b}")
        only_a, only_b = _options(x) - _options(y), _options(y) - _options(x)
        if only_a or only_b:
            more = [" ".join(sorted(only)) or "nothing more" for only in (only_a, only_b)]
            reasons.append(f"{x.function} built with {more[0]} in {a}, {more[1]} in {b}")
    if clock_a != clock_b:
        reasons.append(f"timed by different clocks: {clock_a} in {a}, {clock_b} in {b}")
    return tuple(reasons)


def _kind(one: Product, other: Product) -> str:
    vendors = sum(not any(isinstance(s, KernelLaunch) for s in p.steps) for p in (one, other))
    return ("kernel against kernel", "kernel against vendor", "vendor against vendor")[vendors]


def audit(
    first: tuple[str, Any], second: tuple[str, Any], op: str, variant: str,
    tile: int | None, dtype: str, shape: Shape, second_tile: int | None = None,
) -> Audit:  # fmt: skip
    """One configuration planned on two compiled backends (label, backend) and compared;
    ``second_tile``: the second's tile where it differs (a mismatched pair)."""
    A, B = make_operands(shape, 0, np.dtype(dtype), batch=2 if operation(op).batched else None)
    planned = []
    for (label, backend), chosen in ((first, tile), (second, second_tile or tile)):
        product = backend.planned(op, variant, chosen, A, B)
        planned.append((label, product, backend.clock_of(product)))
    kind = _kind(planned[0][1], planned[1][1])
    reasons = compared(planned[0], planned[1])
    kernels = [_kernels(product) for _, product, _ in planned]
    compiled = tuple(
        _machine_code((first[0], first[1], x), (second[0], second[1], y), np.dtype(dtype))
        for x, y in zip(*kernels, strict=False)
        if (x.family, x.function) == (y.family, y.function)
    )
    digests = tuple(source_digest(k[-1].family, b.name) if k else "" for k, (_, b) in
                    zip(kernels, (first, second), strict=True))  # fmt: skip
    return Audit(op, variant, tile, dtype, shape, first[0], second[0], kind, reasons,
                 compiled, (digests[0], digests[1]))  # fmt: skip


def _kernels(product: Product) -> list[KernelLaunch]:
    return [step for step in product.steps if isinstance(step, KernelLaunch)]


def _machine_code(first: tuple[str, Any, KernelLaunch], second: tuple[str, Any, KernelLaunch],
                  dtype: np.dtype[Any]) -> str:  # fmt: skip
    """One line on what two backends (label, backend, launch) compiled a twin kernel to."""
    built = []
    for label, backend, launch in (first, second):
        try:
            built.append((label, backend.machine_code(launch, dtype)))
        except XBackendError as error:
            return f"{launch.function}: machine code not read in {label}: {error}".splitlines()[0]
    return differences(first[2].function, built[0], built[1])


def audited_pair(opened: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """The two backends of ``opened`` an audit compares: its first two that plan here
    (compiled ones); none where fewer do (a cluster's devices plan on their workers)."""
    compiled = [(label, b) for label, b in opened if hasattr(b, "planned")][:2]
    return compiled if len(compiled) == 2 else []


def audits(plan: Plan, opened: Sequence[tuple[str, Any]]) -> list[Audit]:
    """Every runnable configuration of ``plan`` that the pair of ``opened`` both run
    (``audited_pair``), at its first shape; none without a pair."""
    compiled = audited_pair(opened)
    if not compiled:
        return []
    (a, _), (b, _) = compiled
    shape = plan.shapes[0]
    keys: dict[str, set[tuple[str, str, int | None, str]]] = {a: set(), b: set()}
    for line in configs(plan, compiled):
        if line.problem is None:
            keys[line.label].add((line.op, line.variant, line.tile, line.dtype))
    both = sorted(keys[a] & keys[b], key=lambda k: (k[0], k[1], k[2] or 0, k[3]))
    found = []
    for op, variant, tile, dtype in both:
        try:
            found.append(audit(compiled[0], compiled[1], op, variant, tile, dtype, shape))
        except XBackendError as error:  # a shape its rules refuse, a tile one device lacks
            reason = f"not planned: {error}".splitlines()[0]
            found.append(Audit(op, variant, tile, dtype, shape, a, b, "unknown", (reason,)))
    return found


CSV_NAME = "fairness.csv"


def summary(found: Sequence[Audit]) -> list[str]:
    """What ``compare`` prints before its sweep: the counts, then each UNFAIR pair."""
    if not found:
        return []
    unfair = [each for each in found if each.reasons]
    first = found[0]
    head = (f"fairness of {first.second} against {first.first}, as planned at {first.shape}: "
            f"{len(found) - len(unfair)} FAIR, {len(unfair)} UNFAIR ({CSV_NAME})")  # fmt: skip
    apart = [line for each in found for line in each.compiled if " compiled apart: " in line]
    built = [f"  {len(apart)} twin kernels compiled apart (registers, shared memory or the hot "
             "loop: the compilers'), listed in the CSV"] if apart else []  # fmt: skip
    return [head, *(f"  {each.line()}" for each in unfair), *built]


def write_csv(found: Sequence[Audit], path: Path) -> None:
    """One row a configuration: what was compared, the kind, the verdict, the reasons."""
    rows = [("op", "variant", "tile", "dtype", "M", "K", "N", "first", "second", "kind",
             "verdict", "reasons", "compiled", "digest_first", "digest_second")]  # fmt: skip
    rows += [(a.op, a.variant, str(a.tile or ""), a.dtype, str(a.shape.M), str(a.shape.K),
              str(a.shape.N), a.first, a.second, a.kind, a.verdict, "; ".join(a.reasons),
              " | ".join(a.compiled), *a.digests) for a in found]  # fmt: skip
    buffer = io.StringIO()
    csv.writer(buffer).writerows(rows)
    atomic_write(path, buffer.getvalue())


def read_csv(folder: Path) -> list[dict[str, str]]:
    """The audit a ``compare`` wrote into a results folder, as rows of text (the report
    shows them as data); none where there is no such file or it cannot be read."""
    try:
        text = read_small_text(folder / CSV_NAME)
    except (OSError, ValueError):
        return []
    try:
        rows = list(csv.DictReader(io.StringIO(text)))
    except csv.Error:
        return []
    return [row for row in rows if row.get("verdict") in ("FAIR", "UNFAIR")]
