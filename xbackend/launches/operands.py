"""Operands as the kernels take them: checked, poisoned, and laid out as spans of memory.

A matrix goes to a device as one contiguous run of elements and a leading dimension
(its row stride): a view whose rows are contiguous goes as it is, other views are
copied compactly first (``row_major_span``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from xbackend.errors import UnsupportedParameter
from xbackend.operations import OPS, Operation, operation
from xbackend.problems import DTYPES

if TYPE_CHECKING:
    from xbackend.launches.specs import DeviceInfo

Array = np.ndarray[Any, Any]

SUPPORTED_DTYPES = tuple(DTYPES.values())
# The farthest element offset the kernels' default build reaches with its 32-bit ints. A
# product whose offsets pass it gets the wide build (64-bit offsets, ``plans.py``); no
# size is refused for it.
INDEX_MAX = 2**31 - 1
# The kernels count rows, columns and the inner dimension with 32-bit ints in both builds
# (so do CUDA's grids and cuBLAS), with room for a tile past the last row or column.
MAX_DIMENSION = 2**31 - 2**16
# A view goes to the device as it is only while its span (first to last element) is at
# most this many times its own size: beyond, most of the upload would be the gaps between
# its rows (a 3×4 view of a 3×2**30 array spans 8 GiB), and a compact copy moves less.
MAX_SPAN_RATIO = 2


def output_shape(op: str | Operation, A: Array, B: Array) -> tuple[int, ...]:
    """The shape of ``op``'s result for checked operands."""
    return operation(op).output_shape(A, B)


def _known(op: str | Operation) -> Operation:
    try:
        return operation(op)
    except ValueError:
        raise UnsupportedParameter(
            f"unknown operation {op!r}; operations: {', '.join(OPS)}"
        ) from None


def check_operands(A: Any, B: Any, op: str | Operation = "mm") -> tuple[Array, Array]:
    """Check two operands of ``op``; return them as arrays (views are kept as they are).

    Raises ``UnsupportedParameter`` (a ``ValueError``) naming what is wrong.
    """
    product = _known(op)
    for label, X in (("A", A), ("B", B)):
        if isinstance(X, np.ma.MaskedArray):
            # np.asarray would drop the mask and compute with whatever lies under it.
            raise UnsupportedParameter(
                f"{label} is a masked array, whose mask the kernels cannot honour; "
                f"fill it first, e.g. {label}.filled(0)"
            )
    A, B = np.asarray(A), np.asarray(B)
    for label, X in (("A", A), ("B", B)):
        _check_one(product, label, X)
    if A.dtype != B.dtype:
        raise UnsupportedParameter(f"A is {A.dtype} but B is {B.dtype}")
    _check_pair(product, A, B)
    return A, B


def _check_one(op: Operation, label: str, X: Array) -> None:
    kind = "a batch of matrices (3-D)" if op.batched else "a 2-D matrix"
    if X.ndim != op.ndim:
        raise UnsupportedParameter(f"{op.name}: {label} must be {kind}, got shape {X.shape}")
    if X.dtype not in SUPPORTED_DTYPES:
        names = ", ".join(str(d) for d in SUPPORTED_DTYPES)
        raise UnsupportedParameter(
            f"{label} has dtype {X.dtype}; supported: {names} (convert with .astype)"
        )


def _check_pair(op: Operation, A: Array, B: Array) -> None:
    if op.batched and A.shape[0] != B.shape[0]:
        raise UnsupportedParameter(f"{op.name}: batch sizes differ: {A.shape[0]} and {B.shape[0]}")
    if A.shape[-1] != B.shape[-2]:
        raise UnsupportedParameter(
            f"inner dimensions differ: A is {A.shape[-2]}×{A.shape[-1]}, "
            f"B is {B.shape[-2]}×{B.shape[-1]}"
        )
    if op.shape_problem(A.shape[-2], B.shape[-1]):
        raise UnsupportedParameter(
            f"{op.name} needs an even number of rows in A and columns in B: "
            f"A is {A.shape[0]}×{A.shape[1]}, B is {B.shape[0]}×{B.shape[1]}"
        )


def dimension_problem(A: Array, B: Array) -> str | None:
    """Why the kernels cannot take these operands' dimensions (M, N, K past
    ``MAX_DIMENSION``), or None. The number of elements is never the reason."""
    for label, X in (("A", A), ("B", B)):
        if max(X.shape[-2:]) > MAX_DIMENSION:
            shape = "×".join(map(str, X.shape))
            return (
                f"{label} is {shape}: the kernels count rows, columns and the inner "
                f"dimension with 32-bit integers, each at most {MAX_DIMENSION}"
            )
    return None


# Set to "finite" (``check`` does, for a second run of a result with NaNs): floats are
# poisoned with a finite value, so that an element still NaN was computed, not left.
POISON_ENV = "XBACKEND_POISON"
# The finite poison's 32-bit word, every byte 0x41: one word fill writes it in float32
# (12.078431) and float64 (2261634.5098) alike, and a sum onto it (C += ...) changes it.
FINITE_POISON_WORD = 0x41414141


def finite_poison() -> bool:
    """Whether floats are poisoned with the finite value (``POISON_ENV``), not NaN."""
    return os.environ.get(POISON_ENV, "") == "finite"


@contextlib.contextmanager
def finitely_poisoned() -> Iterator[None]:
    """Floats poisoned with the finite value while inside (here, and in the isolated
    kernels' process, which takes the parent's ``POISON_ENV`` with each request)."""
    before = os.environ.get(POISON_ENV)
    os.environ[POISON_ENV] = "finite"
    try:
        yield
    finally:
        if before is None:
            del os.environ[POISON_ENV]
        else:
            os.environ[POISON_ENV] = before


def poison_value(dtype: np.dtype[Any]) -> Any:
    """What an output is filled with before a kernel runs: NaN, or the most negative int
    (``finite_poison``: the finite value for floats).

    An element the kernel never writes keeps it and fails the check: NaN is never
    within a tolerance, and -2**31 is far from any product of the test inputs.
    """
    if dtype.kind in "iu":
        return np.iinfo(dtype).min
    if finite_poison():
        return np.frombuffer(FINITE_POISON_WORD.to_bytes(4, "little") * 2, dtype)[0]
    return np.nan


def passed_as_is(X: Array) -> int | None:
    """The leading dimension with which the matrix view ``X`` goes to the device as it
    is, or None where it is copied compactly first (see ``row_major_span``)."""
    rows, columns = X.shape
    item = X.itemsize
    row_stride = X.strides[0]
    if not (
        rows > 1
        and X.strides[1] == item
        and row_stride % item == 0
        and row_stride >= columns * item
    ):
        return None
    ld = row_stride // item
    span = (rows - 1) * ld + columns
    if span > MAX_SPAN_RATIO * X.size:
        return None
    return int(ld)


def row_major_span(X: Array) -> tuple[Array, int]:
    """A matrix as one contiguous run of memory and its leading dimension.

    A view whose rows are contiguous (``A[:, 5:37]``, ``A[3:20]``) is returned as
    the span of its base's memory from its first to its last element, without a
    copy, with its row stride as the leading dimension, where that span is at most
    ``MAX_SPAN_RATIO`` times the view's size (a span past 32-bit offsets gets the
    kernels' wide build, ``plans.py``). Other views (huge strides, Fortran order,
    column steps, reversed rows) are copied to compact C order first: only their
    elements are read, never the gaps between them.
    """
    ld = passed_as_is(X)
    if ld is not None:
        rows, columns = X.shape
        span = np.lib.stride_tricks.as_strided(
            X, shape=((rows - 1) * ld + columns,), strides=(X.itemsize,), writeable=False
        )
        return span, ld
    return np.ascontiguousarray(X).reshape(-1), X.shape[1]


def uploaded_nbytes(X: Array, op: str | Operation) -> int:
    """Bytes of the operand ``X`` that the launch planners put on the device: a view's
    whole span where it goes as it is, gaps included (a batch always goes compact)."""
    ld = None if operation(op).batched else passed_as_is(X)
    if ld is None:
        return int(X.nbytes)
    rows, columns = X.shape
    return int(((rows - 1) * ld + columns) * X.itemsize)


def format_bytes(nbytes: float) -> str:
    """Bytes in the unit that reads best: GiB, MiB or bytes."""
    if nbytes >= 2**30:
        return f"{nbytes / 2**30:.3g} GiB"
    return f"{nbytes / 2**20:.3g} MiB" if nbytes >= 2**20 else f"{int(nbytes)} bytes"


def out_of_memory(
    device: DeviceInfo, A: Array, B: Array, C: tuple[int, ...], uploaded: int, detail: object
) -> str:
    """What a product that does not fit ``device`` needs: ``uploaded`` bytes of A and B
    (their views' gaps included) and C's; ``detail``, the driver's words or a limit."""

    def dims(shape: tuple[int, ...]) -> str:
        return "×".join(map(str, shape))

    need = uploaded + int(np.prod(C)) * A.itemsize
    memory = device.global_mem_bytes
    has = f"{format_bytes(memory)} in all" if memory else "an unknown amount of memory"
    gaps = " with the gaps between a view's rows" if uploaded > A.nbytes + B.nbytes else ""
    text = (
        f"out of memory on {device.name}: A {dims(A.shape)}, B {dims(B.shape)} "
        f"and C {dims(C)} ({A.dtype}) need {format_bytes(need)}{gaps}; the device has {has}"
    )
    return f"{text} ({detail})" if detail else text
