"""One point of a sweep: checked whether it can run, measured, verified, recorded.

Every way a point can end is a record: skipped (its configuration cannot run, it
failed at a smaller size, it cannot fit, it would exceed the budget), an error,
a wrong result, or a verified time.
"""

from __future__ import annotations

import dataclasses
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from xbackend.backends.peaks import peak_flags, peaks
from xbackend.errors import KernelCompileError, UnsupportedParameter, XBackendError
from xbackend.launches.operands import format_bytes
from xbackend.measuring.timing import Stats, noisy
from xbackend.measuring.verified import Verifier
from xbackend.operations import Operation, Shape, operation
from xbackend.problems import (
    AUTO,
    CHUNK_ELEMENTS,
    FREIVALDS,
    FREIVALDS_VECTORS,
    FULL,
    Check,
    Freivalds,
    Reference,
    check,
    check_method,
    dtype_named,
)
from xbackend.results import PointRecord
from xbackend.results.plan import Plan
from xbackend.sweep.configs import Config
from xbackend.sweep.cost import CostModel

if TYPE_CHECKING:
    from xbackend.launches.specs import Measurement

Array = np.ndarray[Any, Any]

# A configuration's first size above this many flops is preceded by a pilot run.
PILOT_ABOVE_FLOPS = 2e9
# The fewest samples a point is worth measuring with: a point whose first run, warm-up
# and this many samples would exceed the budget is skipped. Between this and
# --min-samples, sampling stops at --timeout.
FEWEST_SAMPLES = 3


class Described(XBackendError):
    """An error whose text is the point's whole reason, described where it happened (a
    user's kernel measured in another process: ``isolation.py``)."""


class Measurer(Protocol):
    """What measures a configuration's product: its backend here (``in_process``), or a
    process of its own for a user's kernel (``isolation.Isolation.measure``)."""

    def __call__(self, config: Config, A: Array, B: Array, **options: Any) -> Measurement: ...


def in_process(config: Config, A: Array, B: Array, **options: Any) -> Measurement:
    """``config``'s product measured by its backend, in this process."""
    return config.backend.measure(A, B, config.variant, config.tile, op=config.op, **options)


def fewest_samples(plan: Plan) -> int:
    return min(plan.sampling.min_samples, FEWEST_SAMPLES)


class SharedReferences(Protocol):
    """Where references are shared with other processes (``cluster/host_references.py``):
    the one named, made by ``make`` where none was made yet."""

    def reference(self, name: str, make: Callable[[], Reference]) -> Reference: ...


class Inputs:
    """Operands and references of one size, made once and shared by every configuration
    (and the full references with the processes of ``shared``)."""

    def __init__(self, shape: Shape, seed: int, batch: int, shared: SharedReferences | None = None):
        self.shape, self.seed, self.batch, self.shared = shape, seed, batch, shared
        self._operands: dict[tuple[bool, str], tuple[Array, Array]] = {}
        self._references: dict[tuple[str, str, str], Reference | Freivalds] = {}
        self._checks: dict[tuple[str, str, str], str] = {}

    def operands(self, op: Operation, dtype: str) -> tuple[Array, Array]:
        key = (op.batched, dtype)  # every unbatched operation takes the same operands
        if key not in self._operands:
            made = op.operands(self.shape, self.seed, dtype_named(dtype), self.batch)
            self._operands[key] = made
        return self._operands[key]

    def check_for(self, op: Operation, dtype: str, asked: str = AUTO) -> str:
        """The check of this size's results of ``op`` in ``dtype`` (``chosen_check``),
        chosen once: a reference made for the first configuration takes host memory
        that would otherwise turn auto to Freivalds' for the next."""
        key = (op.name, dtype, asked)
        if key not in self._checks:
            self._checks[key] = chosen_check(op, dtype, self.shape, self.batch, asked)
        return self._checks[key]

    @property
    def nbytes(self) -> int:
        """The host memory its operands and references hold."""
        arrays = [array for pair in self._operands.values() for array in pair]
        for made in self._references.values():
            arrays += [v for v in vars(made).values() if isinstance(v, np.ndarray)]
        return sum(array.nbytes for array in arrays)

    def reference(self, op: Operation, dtype: str, method: str = FULL) -> Reference | Freivalds:
        """What results are checked against: the float64 reference (``full``), or the
        vectors of Freivalds' check (``freivalds``, seeded by the plan's seed)."""
        key = (op.name, dtype, method)
        if key not in self._references:
            A, B = self.operands(op, dtype)
            if method == FREIVALDS:
                self._references[key] = Freivalds.of(A, B, op, seed=self.seed)
            elif self.shared is not None:
                shape = self.shape
                name = f"{op.name}-{dtype}-{shape.M}x{shape.K}x{shape.N}-b{self.batch}-s{self.seed}"
                self._references[key] = self.shared.reference(name, lambda: Reference.of(A, B, op))
            else:
                self._references[key] = Reference.of(A, B, op=op)
        return self._references[key]


def measure_point(
    plan: Plan,
    config: Config,
    record: PointRecord,
    inputs: Inputs,
    cost: CostModel,
    failed: dict[Config, str],
    refusals: tuple[type[Exception], ...] = (),
    measurer: Measurer | None = None,
) -> PointRecord:
    """``record`` (the point, not measured yet) as measured, or skipped with its reason.

    An error of a type in ``refusals`` (``xbackend limits``: out of memory, a size the
    kernels cannot index) makes the point skipped with the error's message, not an error.
    ``measurer`` measures the product (None: ``in_process``).
    """
    measurer = measurer or in_process
    try:
        reason = _skip_reason(plan, config, record, cost, failed, measurer)
    except Described as error:  # a user's kernel that hung or died in its pilot run
        return _failed(record, config, failed, error)
    if reason:
        return dataclasses.replace(record, reason=reason)
    op = operation(config.op)
    method = inputs.check_for(op, config.dtype, plan.check)
    try:
        A, B = inputs.operands(op, config.dtype)
        reference = inputs.reference(op, config.dtype, method)
        verify = Verifier(A, B, op, method, inputs.seed, reference)
        measurement = measurer(config, A, B, sampling=plan.sampling, verify=verify)
    except (KeyboardInterrupt, SystemExit):
        raise
    except refusals as refused:
        return dataclasses.replace(record, reason=str(refused) or type(refused).__name__)
    except Exception as error:
        return _failed(record, config, failed, error)
    measured = _verified(record, measurement, reference)
    measured = _peak_checked(measured, config)
    assert measured.end_to_end_s is not None
    cost.add(config, record.flops, measured.end_to_end_s["median"])
    return measured


def _failed(
    record: PointRecord, config: Config, failed: dict[Config, str], error: Exception
) -> PointRecord:
    """The point as an error, and its configuration's larger sizes skipped after it."""
    reason = describe_error(error)
    failed[config] = reason.splitlines()[0]
    return dataclasses.replace(record, status="error", reason=reason)


def _skip_reason(
    plan: Plan, config: Config, record: PointRecord, cost: CostModel, failed: dict[Config, str],
    measurer: Measurer,
) -> str | None:  # fmt: skip
    """Why this point is not measured: it cannot run, or would take too long."""
    if config.problem:
        return config.problem
    if config in failed:
        return f"failed at a smaller size: {failed[config]}"
    shape = Shape(record.M, record.K, record.N)
    problem = config.backend.shape_problem(
        config.variant, config.op, shape, record.batch, config.tile
    )
    if problem:
        return f"the kernel does not take this shape: {problem}"
    problem = memory_problem(config, shape, record.batch, plan.check)
    if problem:
        return problem
    per_run_s = cost.predict(config, record.flops)
    if plan.budget_s > 0 and per_run_s is None and record.flops > PILOT_ABOVE_FLOPS:
        per_run_s = _pilot(config, shape, record.batch, cost, record.flops, measurer)
    if plan.budget_s > 0 and per_run_s is not None:
        point_s = per_run_s * (1 + plan.sampling.warmup + fewest_samples(plan))
        if point_s > plan.budget_s:
            return (
                f"estimated {point_s:.3g} s for this point exceeds the budget of "
                f"{plan.budget_s:g} s per point (--budget)"
            )
    return None


def _verified(
    record: PointRecord,
    measurement: Measurement,
    reference: Reference | Freivalds,
) -> PointRecord:
    """The record of a measurement: checked against the reference (its first run here, the
    runs after it as they were taken: ``measurement.wrong``), its statistics."""
    first, last = check(measurement.result, reference), check(measurement.last_result, reference)
    which, worst = _worst(measurement, reference, first, last)
    equal = not which
    reason = ""
    if not equal:
        nan = f", {worst.nan_count} elements not finite" if worst.nan_count else ""
        reason = f"{which} differs from the reference beyond the tolerance{nan}"
    kernel_kept, end_to_end_kept = measurement.kept
    # Every sample marked (a GPU capping its power through a long product): the
    # statistics are of them all, and the point says so.
    kernel = Stats.of(kernel_kept or measurement.kernel_s)
    end_to_end = Stats.of(end_to_end_kept or measurement.end_to_end_s)
    # Noisy: the median's 95% interval is wider than diff's verdicts need (timing.noisy).
    flags = ["noisy"] if noisy(kernel_kept or measurement.kernel_s) else []
    if not kernel_kept:
        flags.append("throttled")
    marks = list(measurement.marks)
    # The record keeps the configuration's tile (None: the variant chose), so that a
    # resume finds it under the key it was asked for; a tuned choice is in params.
    return dataclasses.replace(
        record,
        status="ok" if equal else "mismatch",
        reason=reason,
        equal=equal,
        params=measurement.params,
        max_abs_error=worst.max_abs_error,
        bound_ratio=worst.bound_ratio,
        check=worst.method,
        kernel_s=kernel.to_dict(),
        end_to_end_s=end_to_end.to_dict(),
        kernel_samples_s=list(measurement.kernel_s),
        end_to_end_samples_s=list(measurement.end_to_end_s),
        gflops=record.flops / kernel.median / 1e9 if kernel.median > 0 else float("inf"),
        stop=measurement.stop,
        launches=measurement.launches,
        cache=measurement.cache,
        host_memory=measurement.host_memory,
        clock=measurement.clock,
        api_samples_s=list(measurement.api_s),
        gap_samples_s=list(measurement.gap_s),
        cpu_samples_s=list(measurement.cpu_s),
        sample_marks=marks if any(marks) else [],
        state=measurement.state,
        host_load=measurement.host_load,
        flags=flags,
    )


def _worst(
    measurement: Measurement, reference: Reference | Freivalds, first: Check, last: Check
) -> tuple[str, Check]:
    """The first wrong run, named, and its check ("" where every run verified was equal:
    then the larger error of the first and the last). The runs after the first were
    verified as they were taken (``Backend.measure``'s ``verify``: ``measurement.wrong``);
    a backend of a plugin's own that verified none has its last checked alone."""
    if not first.equal:
        return "the first run", first
    if measurement.wrong is not None:
        return measurement.wrong.said, check(measurement.wrong.result, reference)
    if not last.equal:
        return "the last timed run", last
    return "", first if first.bound_ratio >= last.bound_ratio else last


def _peak_checked(record: PointRecord, config: Config) -> PointRecord:
    """The record, flagged where its time beats the device's peak (``backends/peaks.py``):
    a number that cannot have happened, kept out of speed-ups and figures."""
    median = record.kernel_median_s
    if median is None:
        return record
    dtype = dtype_named(config.dtype)
    a, b, _ = operation(config.op).elements(Shape(record.M, record.K, record.N), record.batch)
    # What a cold kernel must read from memory: A and B once (see peak_flags).
    found = peak_flags(
        peaks(config.backend.device, dtype), record.flops, (a + b) * dtype.itemsize,
        median, record.cache,
    )  # fmt: skip
    return dataclasses.replace(record, flags=[*record.flags, *found]) if found else record


def _pilot(
    config: Config, shape: Shape, batch: int, cost: CostModel, point_flops: int,
    measurer: Measurer,
) -> float | None:  # fmt: skip
    """Time one unrecorded run at a quarter of each dimension, to predict this point.

    Without it a configuration's first size has no history, and nothing would stop
    the serial CPU loop from starting an hour-long product.
    """
    op = operation(config.op)
    small = op.pilot_shape(shape)
    try:
        A, B = op.operands(small, 0, dtype_named(config.dtype), batch)
        measured = measurer(
            config, A, B, warmup=0, samples=1, min_samples=1
        )  # the plan's cache mode and host memory need not apply to a prediction
    except (KeyboardInterrupt, SystemExit, Described):
        raise  # Described: a user's kernel hung or died in its own process (isolation.py)
    except Exception:  # MemoryError included
        return None  # the real point will meet the same problem and record it
    cost.add(config, op.flops(small, batch), measured.end_to_end_s[0])
    return cost.predict(config, point_flops)


def _available_host_bytes() -> int | None:
    """What the host can still give (MemAvailable), where the system says."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def host_bytes(op: Operation, shape: Shape, batch: int, itemsize: int, method: str) -> int:
    """What a point needs of the host, its check's share included.

    Always A and B, and the outputs of the first and the last run. The full check
    adds its float64 reference and magnitude (two of C's size), made from float64
    copies of A and B and of their absolute values, and compares with temporaries of
    C's size; Freivalds' check adds only its vectors and a block of rows at a time.
    Making the operands draws each in float64 first.
    """
    a, b, c = op.elements(shape, batch)
    held = (a + b + 2 * c) * itemsize
    if method == FULL:
        return held + 2 * c * 8 + max(2 * (a + b) * 8, 3 * c * 8)
    rows, _ = op.output_size(shape)
    vectors = op.batch_of(batch) * (shape.M + shape.K + shape.N + 2 * rows) * 8
    return held + max(max(a, b) * 8, 4 * CHUNK_ELEMENTS * 8 + 3 * FREIVALDS_VECTORS * vectors)


def chosen_check(op: Operation, dtype: str, shape: Shape, batch: int, asked: str = AUTO) -> str:
    """The check a point gets: ``asked`` (``--check``), or under auto the full check
    up to ``problems.FREIVALDS_ABOVE_FLOPS`` where its reference fits the host."""
    itemsize = dtype_named(dtype).itemsize
    available = _available_host_bytes()
    fits = available is None or host_bytes(op, shape, batch, itemsize, FULL) <= available
    return check_method(asked, op.flops(shape, batch), fits)


def memory_problem(config: Config, shape: Shape, batch: int, asked: str = AUTO) -> str | None:
    """Why this point cannot fit the device or the host, checked before anything is made.

    The device holds A, B and C; the host what ``host_bytes`` counts for the check
    the point gets (``chosen_check``): with Freivalds' no float64 copy of anything.
    """
    itemsize = dtype_named(config.dtype).itemsize
    op = operation(config.op)
    a, b, c = op.elements(shape, batch)
    device = config.backend.device
    on_device = (a + b + c) * itemsize
    if device.global_mem_bytes and on_device > device.global_mem_bytes:
        has = format_bytes(device.global_mem_bytes)
        return f"A, B and C need {format_bytes(on_device)}; the device has {has}"
    if device.max_alloc_bytes and max(a, b, c) * itemsize > device.max_alloc_bytes:
        return (
            f"the largest matrix needs {format_bytes(max(a, b, c) * itemsize)}; one buffer of "
            f"the device holds at most {format_bytes(device.max_alloc_bytes)}"
        )
    method = chosen_check(op, config.dtype, shape, batch, asked)
    on_host = host_bytes(op, shape, batch, itemsize, method)
    available = _available_host_bytes()
    if available is not None and on_host > available:
        what = "the float64 reference" if method == FULL else "Freivalds' check"
        return (
            f"the operands, the outputs and {what} need {format_bytes(on_host)} of host memory; "
            f"{format_bytes(available)} is available"
            + (" (--check freivalds needs no float64 copies)" if method == FULL else "")
        )
    return None


def describe_error(error: BaseException) -> str:
    """An error as a point's reason: xbackend's own errors in their words (they name the
    key, the file or the value), a compile error with the compiler's, anything else with
    its type and where it was raised."""
    if isinstance(error, Described):
        return str(error)[:4000]
    if isinstance(error, XBackendError) and not isinstance(error, KernelCompileError):
        return str(error)[:4000]  # xbackend's own words, naming the key or the file
    text = f"{type(error).__name__}: {error}"
    if isinstance(error, KernelCompileError):  # the compiler's own words, not just "failed"
        said = [  # in the file's name, not the compiler's copy's (PyCUDA's kernel.cu)
            line.strip().replace("kernel.cu(", f"{error.path.name}(")
            for line in error.log.splitlines()
            if "error" in line.lower() and "detected in the compilation" not in line
        ]
        return "; ".join([text.splitlines()[0], *said[:3]])[:4000]
    if not isinstance(error, UnsupportedParameter):
        frame = traceback.extract_tb(error.__traceback__)[-1:]
        if frame:
            text += f" (at {Path(frame[0].filename).name}:{frame[0].lineno})"
    return text[:4000]
