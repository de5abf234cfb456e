"""One kernel checked as a teacher would, at every shape, and timed.

Every kernel runs at held-out edge shapes (1×1, primes, sizes that are not multiples of
the tile, K = 1, more tiles than fit one row of groups) and at the assignment's sizes, on
fresh seeded operands into a NaN-poisoned output, against the float64 reference with its
K-aware bound (``problems.check``); a wrong result says what it looks like
(``diagnosis``). A kernel that does not build, or fails at a launch, is one verdict with
the reason; it does not stop the rest. ``timing``: its median time at the largest size,
with the interval of that median.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from xbackend import families
from xbackend.backends.execution import WroteOutOfBounds
from xbackend.errors import KernelCompileError, XBackendError
from xbackend.families import VariantSpec
from xbackend.grading.coverage import Shortfall, shortfall
from xbackend.grading.diagnosis import COMPUTED, Launch, diagnose
from xbackend.grading.failures import compile_said, refused_said
from xbackend.grading.records import Timing, Verdict
from xbackend.grading.shapes import ruled_out, taken_shapes
from xbackend.launches.element import plan_element
from xbackend.launches.geometries import per_product
from xbackend.launches.launch import KernelLaunch
from xbackend.launches.operands import finitely_poisoned, poison_value
from xbackend.measuring.timing import median_interval
from xbackend.measuring.verified import Verifier
from xbackend.operations import MM, Shape, make_operands
from xbackend.problems import Check, Reference, check
from xbackend.sweep.configs import Config
from xbackend.sweep.isolation import ChildError, Isolation, KernelCrashed, KernelTimeout
from xbackend.sweep.measure import describe_error, in_process
from xbackend.sweep.sizes import DEFAULT_BASE, growth

if TYPE_CHECKING:
    from xbackend.backends.interface import Backend
    from xbackend.launches.specs import Measurement

# Edge shapes (M, K, N) no tile divides: one element, primes, K = 1, a thin row and
# column, and more column tiles than 16 groups of 16.
EDGE_SHAPES = (
    Shape(1, 1, 1), Shape(7, 13, 5), Shape(31, 17, 29), Shape(33, 20, 17), Shape(40, 1, 24),
    Shape(1, 64, 97), Shape(97, 64, 1), Shape(129, 67, 271),
)  # fmt: skip
TIMED_SAMPLES = 10
# Processes a kernel may lose (a hang, a crash) before its shapes left are not run: each
# hang costs the deadline (--kernel-timeout, 60 s), and a class has many kernels.
MOST_LOST = 3
UNTOLD = "unwritten or computed, not told apart without a second run into a finite poison"


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
    isolation: Isolation | None = None, dtype: str = "float32", finding: str = "",
    under_sanitizer: bool = False,
) -> Iterator[Verdict]:  # fmt: skip
    """``variant`` at each of ``shapes``, at its default tile. A failure that every shape
    would meet (it does not compile or build, its attribute refuses the launch) is one
    verdict at no shape and ends it; a hang or a crash at one shape is that shape's, and
    the next runs in a fresh process, up to ``MOST_LOST`` of them. A wrong result says
    what it looks like (``diagnosis``); NaNs it computed end with the sanitizer's
    ``finding`` where there is one. A result with NaNs is run a second time, into a
    finite poison, to tell unwritten from computed; not ``under_sanitizer``, whose
    deadline is for one run a shape, and where the first lost process ends it."""
    spec = backend.variant_spec(variant)
    problem = backend.variant_problem(variant, np.dtype(dtype))
    if not problem and spec.default_tile is not None:  # a size of its manifest's that
        problem = spec.expression_problem(spec.default_tile)  # has no value at its tile
    if problem:
        yield Verdict(label, variant, None, None, problem)
        return
    lost = 0
    for shape in _taken(spec, shapes):
        short = shortfall(spec, shape)
        if short is not None and short.empty:  # no group: nothing would run, on any device
            yield Verdict(label, variant, shape, False, short.said)
            continue
        A, B = make_operands(shape, seed, np.dtype(dtype))
        config = Config(label, backend, MM.name, variant, spec.default_tile, dtype)
        try:
            result = _measured(isolation, config, A, B, warmup=0, samples=0).result
        except XBackendError as error:
            verdict = _failed(label, spec, shape, error)
            if isinstance(error, KernelTimeout) and verdict.shape is not None:
                slow = ruled_out(shapes, shape)  # at a shape its rules chose: its work said
                verdict = dataclasses.replace(verdict, detail=verdict.detail + slow)
            yield verdict
            if verdict.shape is None:  # every shape's: the rest would say it again
                return
            lost += _lost(error)
            if lost >= (1 if under_sanitizer else MOST_LOST):
                return  # the shapes left are not run: the summary counts them
            continue
        untouched = None if under_sanitizer else _untouched(isolation, config, A, B, result)
        yield _verdict(label, spec, shape, result, A, B, untouched, finding, short)


# A child's error as its process described it: the class's name first, where it was raised
# last; neither is the student's to read.
_CLASS_NAME = re.compile(r"^[A-Z][A-Za-z]*(?:Error|Parameter|Memory|Unavailable): ")
_RAISED_AT = re.compile(r" \(at [\w.]+\.py:\d+\)$")


def _plain(said: str) -> str:
    """``UnsupportedParameter: family.toml: ... (at element.py:88)`` as ``family.toml: ...``."""
    return _RAISED_AT.sub("", _CLASS_NAME.sub("", said))


def _lost(error: XBackendError) -> int:
    """1 where the kernels' process was lost at a shape (a hang, a crash, an error that
    ends it: a GPU's fault leaves its device unusable), else 0."""
    if isinstance(error, ChildError):
        return 0 if str(error).startswith(WroteOutOfBounds.__name__) else 1
    return 1 if isinstance(error, (KernelTimeout, KernelCrashed)) else 0


def _failed(label: str, spec: VariantSpec, shape: Shape, error: XBackendError) -> Verdict:
    """The verdict on a run that raised ``error``: at no shape where every shape would
    raise it (a compile error, a build that hung or crashed, a launch the kernel's own
    attribute refuses), in the student's words; else at ``shape``."""
    text = describe_error(error) if isinstance(error, KernelCompileError) else str(error)
    said = compile_said(text) or refused_said(text, spec)
    if said:
        return Verdict(label, spec.name, None, None, said)
    first = _plain(text.splitlines()[0]) if text else "it did not run"
    if isinstance(error, (KernelTimeout, KernelCrashed)) and error.building:
        return Verdict(label, spec.name, None, None, f"does not build: {first}")
    if isinstance(error, WroteOutOfBounds):  # measured here: C's zone was written
        return Verdict(label, spec.name, shape, False, text)
    if isinstance(error, ChildError) and text.startswith(WroteOutOfBounds.__name__):
        said = text.split(": ", 1)[1].split(" (at ")[0]  # measured in its process: the same
        return Verdict(label, spec.name, shape, False, said)
    return Verdict(label, spec.name, shape, None, first)


def _taken(spec: VariantSpec, shapes: Sequence[Shape]) -> list[Shape]:
    """``shapes``, each as the nearest one the kernel's rules on the sizes take, once
    (``shapes.taken_shapes``: a kernel of one size at that size)."""
    return taken_shapes(spec, shapes)


def _untouched(
    isolation: Isolation | None, config: Config, A: np.ndarray, B: np.ndarray,
    result: np.ndarray,
) -> np.ndarray | None:  # fmt: skip
    """Where a second run into C poisoned with a finite value left that value: the
    elements the kernel did not write. None where the result has no NaN to tell apart
    (or the second run did not finish): a NaN is then not called unwritten."""
    if result.dtype.kind != "f" or not np.isnan(result).any():
        return None
    try:
        with finitely_poisoned():
            poison = poison_value(result.dtype)
            again = _measured(isolation, config, A, B, warmup=0, samples=0).result
    except XBackendError:
        return None
    return np.asarray(again == poison).reshape(result.shape)


def _verdict(
    label: str, spec: VariantSpec, shape: Shape, result: np.ndarray, A: np.ndarray,
    B: np.ndarray, untouched: np.ndarray | None = None, finding: str = "",
    short: Shortfall | None = None,
) -> Verdict:  # fmt: skip
    """The verdict on one result; where it is wrong, what it looks like and the launch
    that made it (NaNs called unwritten only where ``untouched`` says so; the manifest's
    launch first where it left them: ``short``)."""
    found = check(result, Reference.of(A, B))
    detail = (
        nan_said(found.nan_count)
        if found.nan_count
        else f"largest error {found.bound_ratio:.2g}× its bound"
    )
    if found.equal:
        return Verdict(label, spec.name, shape, True, detail)
    if untouched is None and result.dtype.kind == "f" and np.isnan(result).any():
        detail += f": {UNTOLD}"  # neither unwritten nor computed is proven
    else:
        launch = launch_of(spec, A, B)
        proof = untouched if untouched is not None else np.zeros(result.shape, dtype=bool)
        said = diagnose(result, A, B, spec.default_tile, launch, proof)
        if short is not None and "unwritten" in said:  # the manifest's launch left them
            said = f"{short.said}; {said}"
        detail += f": {said}" if said else ""
        if launch is not None and "launch covered" in said:
            detail += f" ({_launch_keys(spec)})"
        if finding and COMPUTED in said:
            detail += f"; {finding}"
    return Verdict(label, spec.name, shape, False, detail)


def nan_said(count: int) -> str:
    """``1 element NaN``, ``35 elements NaN``."""
    return f"{count} element{'s' if count != 1 else ''} NaN"


def _launch_keys(spec: VariantSpec) -> str:
    """What in the manifest made the launch: where a kernel expects another, to change."""
    tm, tn = spec.per_thread(spec.default_tile or 1)
    patch = (
        f", {tm}×{tn} outputs a work-item (patch)"
        if (tm, tn) != (1, 1)
        else ", one output a work-item"
    )
    return (
        f"TILE = {spec.default_tile} (default_tile), groups of TILE×TILE outputs{patch}, x "
        f"along {spec.x}: family.toml sets these; the kernel must compute what they cover"
    )


def default_dtype(spec: VariantSpec) -> str:
    """The element type a variant is checked in where none is asked for: float32 where its
    family computes in it, else the first its manifest declares."""
    return "float32" if not spec.dtypes or "float32" in spec.dtypes else spec.dtypes[0]


def launch_of(spec: VariantSpec, A: np.ndarray, B: np.ndarray) -> Launch | None:
    """The grid and group a variant is launched with at its default tile, in the
    backends' own plan (None where there is no single launch to name)."""
    if spec.default_tile is None or per_product(spec) or spec.group or spec.before:
        return None  # a launch the manifest writes is its own: no default to name
    try:
        steps = plan_element(MM.name, spec, A, B, spec.default_tile).launches
    except (XBackendError, ValueError, ArithmeticError):
        return None
    if len(steps) != 1 or not isinstance(steps[0], KernelLaunch):
        return None
    step = steps[0]
    return Launch(grid=step.grid[:2], group=step.block[:2], x=spec.x)


def timing(
    backend: Backend, variant: str, shape: Shape, seed: int,
    isolation: Isolation | None = None, label: str = "", dtype: str = "float32",
) -> Timing | None:  # fmt: skip
    """The median kernel time of ``variant`` at ``shape`` (at the tile its backend chooses:
    xbackend's own lines, tuned where ``tune`` was run), with its interval and the clock
    that timed it ("globaltimer": the device span; else the API's); None where it did not
    run or gave a wrong result. A user's kernel in the ``isolation``'s process."""
    found = verified_timing(backend, variant, shape, seed, isolation, label, dtype, None)
    return found if isinstance(found, Timing) else None


def verified_timing(
    backend: Backend, variant: str, shape: Shape, seed: int, isolation: Isolation | None,
    label: str, dtype: str, tile: int | None,
) -> Timing | Verdict | None:  # fmt: skip
    """``variant`` timed at ``shape`` at ``tile`` (``check`` passes the default tile it
    verified at, never the tune cache's), every run's result it downloads verified: the
    first, each warm-up's and each timed one's (a launch that changes its own inputs, A
    doubled in place by a ``before`` launch, or state a kernel keeps between runs, is
    right once and wrong after, or wrong at one run alone), verified as it is taken, in
    the kernel's own process, outside every timed window (``Backend.measure``'s
    ``verify``). The launches of a short kernel's batch are downloaded once, after the
    last: those before it are not seen. A wrong one is a WRONG verdict at ``shape``
    instead of a time; None where it did not run. A user's kernel at the shape nearest
    ``shape`` its rules take."""
    shape = taken_shapes(backend.variant_spec(variant), [shape])[0]
    A, B = make_operands(shape, seed, np.dtype(dtype))
    config = Config(label, backend, MM.name, variant, tile, dtype)
    reference = Reference.of(A, B)
    try:
        measured = _measured(isolation, config, A, B, samples=TIMED_SAMPLES, min_samples=5,
                             verify=Verifier(A, B, reference=reference))  # fmt: skip
    except XBackendError:
        return None
    wrong = _wrong_run(measured, reference)
    if wrong is not None:
        which, result = wrong
        found = check(result, reference)
        return Verdict(label, variant, shape, False, _timed_wrong(which, found, result, A, B))
    kept, _ = measured.kept
    if not kept:
        return None
    low, high = median_interval(kept)
    median = float(np.median(kept))
    return Timing(label, variant, shape, median, low, high, measured.clock, len(kept), dtype)


def _wrong_run(measured: Measurement, reference: Reference) -> tuple[str, np.ndarray] | None:
    """The first of a timed measurement's runs whose result is wrong, named, and its
    result: its first run, else the first the sampler found wrong, else its last (a
    backend that verified none)."""
    if not check(measured.result, reference).equal:
        return "its first run", measured.result
    if measured.wrong is not None:
        return measured.wrong.said, measured.wrong.result
    if not measured.verified and not check(measured.last_result, reference).equal:
        return "its last timed run", measured.last_result
    return None


def _timed_wrong(which: str, found: Check, result: np.ndarray, A: np.ndarray, B: np.ndarray) -> str:
    """Why a timed run's result is wrong, in words: its NaNs (not told apart: a timed run
    has no second run), else its error and what it looks like."""
    head = f"{which} differs from the reference"
    why = (
        " (its first was equal: a launch that changes its inputs, or state kept between runs?)"
        if which != "its first run"
        else ""
    )
    if found.nan_count:
        return f"{head}: {nan_said(found.nan_count)}{why}"
    said = diagnose(result, A, B)
    return f"{head}: largest error {found.bound_ratio:.2g}× its bound" + (
        f": {said}{why}" if said else why
    )


def unrunnable(variants: Sequence[str], opened: Sequence[tuple[str, Backend]]) -> dict[str, str]:
    """The variants no opened backend runs, each with why: its family has no source in the
    languages of the backends here."""
    found = {}
    for variant in variants:
        if any(variant in backend.variants() for _, backend in opened):
            continue
        spec = families.find_variant(variant)
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
