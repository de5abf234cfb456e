"""Element types, the float64 reference and the check ("code equality").

The operations themselves (mm, bmm, rmm: shapes, counts, operands) are data in
``xbackend.operations``; their names are re-exported here for older callers.

The check ("code equality") compares a result with a float64 NumPy reference,
element by element, against a tolerance scaled by the element's own magnitude
``m = (|A| @ |B|)``: ``|C - ref| <= f(K) · eps · m``.

* For K <= 16, f(K) = K: the worst-case rounding bound of a dot product in any
  summation order (γ_K ≈ K·eps/2), so a correct kernel cannot fail it.
* Beyond, f(K) = 4·sqrt(K). Rounding errors of independent terms grow like
  sqrt(K), not K, and the worst-case bound gets so loose at large K that a
  dropped term could hide under it (at K = 4096 it is about half a term).
  With 4·sqrt(K) a correct float32 kernel stays far under the tolerance on
  these random inputs (``bound_ratio`` in the results shows how far), while a
  missing term, a wrong index or an unwritten (NaN-poisoned) element fails by
  orders of magnitude (tests/test_check.py proves both).

For rmm the sums have 4·K terms (naive4 adds every product of the block), so f
is taken at 4·K. Integer products are exact: they must equal the reference.

NaN and Inf go through as in NumPy's float64 product, with one exception: rmm's
naive4 adds its 4·K products one by one, as the definition reads, so an infinity
times products of both signs (−inf·0.75 + −inf·(−0.25)) is NaN where the
reference, summing the pairs first, has −inf·0.5 = −inf.

Freivalds' check (:class:`Freivalds`), for products too large for that reference
-------------------------------------------------------------------------------

The full reference costs two float64 products of the point's size (8.8 TFLOP each at
16384³) and float64 copies of every matrix. Freivalds' method compares instead, for
s = ``FREIVALDS_VECTORS`` random sign vectors x (±1, seeded), the float64 products
``C·x`` and ``A·(B·x)`` (for rmm ``fold_rows(A·(B·spread(x)))``, see
``xbackend.operations``): O((M·K + K·N + M·N)·s) work, the matrices converted to
float64 a block of rows at a time. ``auto`` (the default) uses it above
``FREIVALDS_ABOVE_FLOPS`` or where the full reference would not fit the host.

The bound, row by row. Let E = C − A·B be the result's error; the full check passes
C iff |E_ij| ≤ c_ij = f(K)·eps·m_ij, m = |A|·|B|. The exact residual is
r_i = (C·x − A·(B·x))_i = Σ_j E_ij·x_j (N' = the output's columns).

(a) Worst case, the elementwise bound carried through the row sum:
    |r_i| ≤ Σ_j c_ij·|x_j| = f(K)·eps·(|A|·(|B|·|x|))_i = f(K)·eps·l1_i, as |x| = 1.
    It holds for any x, but it adds the errors of a row as if they all had one
    sign: about √N'/τ times wider than (b).
(b) Random signs: the x_j are drawn independently of E, so r_i is a Rademacher
    sum and Hoeffding's inequality gives |r_i| ≤ τ·(Σ_j E_ij²)^½ but with
    probability 2·exp(−τ²/2). With |E_ij| ≤ c_ij, (Σ_j E_ij²)^½ ≤ f(K)·eps·‖m_i‖₂,
    and ‖m_i‖₂ = ‖Σ_k |a_ik|·|b_k|‖₂ ≤ Σ_k |a_ik|·‖b_k‖₂ = (|A|·w)_i = l2_i,
    w_k = ‖b_k‖₂ the norm of B's row k (the triangle inequality, nearly tight:
    the |b_k| are non-negative vectors, all pointing much the same way). τ = 8.
The kernel's share of the bound is the smaller: T_i = f(K)·eps·min(l1_i, τ·l2_i).
(c) Our own float64 rounding, in any summation order (Higham, Accuracy and
    Stability of Numerical Algorithms, §3.1: |fl(xᵀy) − xᵀy| ≤ γ_n·|x|ᵀ|y|,
    γ_n = n·u/(1 − n·u), u = 2⁻⁵³): fl(C·x) is off by at most γ_{N'+1}·(|C|·1)_i
    (N' terms, and the subtraction), fl(A·(B·x)) by γ_{N+K+2}·l1_i (N terms in
    B·x, K in A·y, rmm's fold and the subtraction). Negligible for float32; for
    float64 results a floor near (N + K)·u·l1_i.
C passes iff every |fl(r_i)| ≤ bound_i = T_i + γ_{N'+1}·(|C|·1)_i + γ_{N+K+2}·l1_i
(+ the smallest normal number), for every vector. ``max_abs_error`` is the largest
|fl(r_i)|, ``bound_ratio`` the largest |fl(r_i)| / bound_i. For rmm, m, l1 and l2 are
those of the folded operands and f is taken at 4·K, as in the full check; bmm
checks each product of the batch with vectors of its own.

What it promises:

* No false alarm: a result the full check passes fails Freivalds' only where (b)'s
  tail is hit, with probability at most 2·exp(−32) = 2.5e-14 per row and vector:
  about 2e-7 for the 8 million rows × vectors of a batch of 8 products at 32768².
* A wrong element is caught: if any element of row i is off by more than
  bound_i + γ-terms, one vector misses it with probability at most 1/2, whatever
  the rest of the row (of the two signs of that element's x_j at most one can put
  the sum inside the bound), so s = 32 vectors miss it with probability at most
  2⁻³² = 2.3e-10. A single wrong element in an otherwise correct result, off by more
  than twice its row's bound, is caught by every vector but with probability
  2.5e-14 each: with certainty, in practice.
* Its resolution is coarser: bound_i is about τ·√N' times the elementwise tolerance
  of the row's elements, so a lone wrong element must be off by that much more
  than the full check needs. Errors that run along a row (a dropped term, a wrong
  index, a missing tile) add up in r_i like √N' too, and are caught about τ times
  later than by the full check: a kernel that drops one term of each sum is caught
  up to K ≈ 12000 by Freivalds' and up to K ≈ 40000 by the full check (M = N =
  256; at K = 4096, 5 and 30 times the bound). That is why ``auto`` keeps the full
  check while it is affordable; gross errors (garbage, unwritten or misplaced
  blocks, overflowing indices) are caught at any size.
* So ``FREIVALDS_ROWS`` random rows of each product are also checked in full, element
  by element, against float64 rows computed from A's rows and B a block at a time
  (2·R·K·N' flops, a second at 16384² on a GPU host's CPUs): an error that runs
  along every row (a dropped term) meets the full check's tolerance there, and a
  lone wrong element the full check's resolution with probability R/M'.

Integer products are exact here too: x is ±1 and, while l1 and |C|·1 stay below
2⁵³ (operands of ±8 keep them there while N·K < 2⁴⁶), every value float64 computes
is an integer it holds exactly, so the residual must be 0: the bound is half a unit,
as in the full check (beyond 2⁵³ the rounding terms (c) are added to it).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import math
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from xbackend.operations import OPS, Operation, Shape, make_operands, operation

__all__ = [
    "CHECKS",
    "DTYPES",
    "FREIVALDS_ABOVE_FLOPS",
    "FREIVALDS_VECTORS",
    "OPS",
    "Check",
    "Freivalds",
    "Reference",
    "Shape",
    "check",
    "check_method",
    "dtype_named",
    "flops",
    "make_operands",
    "output_size",
    "tolerance_factor",
]

Array = np.ndarray[Any, Any]

DTYPES: dict[str, np.dtype] = {
    "int32": np.dtype(np.int32),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
}

# The checks (``compare --check``): auto chooses between the other two (check_method).
AUTO, FULL, FREIVALDS = "auto", "full", "freivalds"
CHECKS = (AUTO, FULL, FREIVALDS)
# Above this nominal count (2·M·N·K, the point's flops) auto checks with Freivalds'
# method: 8192³ (2^40) is still checked in full, 16384³ is not. The full reference is
# two float64 products of this size: at 2^40 about 40 s on a 2-core CI machine and a
# few seconds on a 16-core GPU host, then 8 times more per doubling (and 6 float64
# matrices of the output's size in memory) while the GPU's product takes milliseconds.
FREIVALDS_ABOVE_FLOPS = 2**40
# s: a wrong row is missed with probability at most 2^-s. The work is in reading the
# matrices, not in the vectors: at 4096³ 8, 16 and 32 vectors take the same time.
FREIVALDS_VECTORS = 32
FREIVALDS_ROWS = 16  # rows of each product also checked in full (module docstring)
FREIVALDS_TAIL = 8.0  # τ: a correct row fails with probability at most 2·exp(−τ²/2)
# Matrices are converted to float64 a block of rows of about this many elements at a time.
CHUNK_ELEMENTS = 2**22
# Elements of a result checked at once against the reference (``check``), and the most
# threads one check is split between: at 4096² on a 16-core H200 host one thread took
# 0.1 s a check (two a point), and the check was a quarter of a plan's time.
_CHECK_CHUNK = 2**16
_CHECK_THREADS = 8
_UNIT_ROUNDOFF = 2.0**-53  # float64's u
_EXACT_BELOW = 2.0**53  # integers float64 holds exactly


def output_size(op: str | Operation, shape: Shape) -> tuple[int, int]:
    """Rows and columns of one product's result: for rmm, (M/2)×(N/2)."""
    return operation(op).output_size(shape)


def flops(op: str | Operation, shape: Shape, batch: int = 1) -> int:
    """Nominal operation count of one point (see ``Operation.flops``)."""
    return operation(op).flops(shape, batch)


def dtype_named(name: str) -> np.dtype:
    """The NumPy dtype for a name xbackend supports, or an error listing them."""
    if name not in DTYPES:
        raise ValueError(f"unsupported dtype {name!r}; supported: {', '.join(DTYPES)}")
    return DTYPES[name]


def check_method(asked: str, point_flops: int, full_fits: bool = True) -> str:
    """The check a point gets: ``asked`` unless it is auto, which is the full check up
    to ``FREIVALDS_ABOVE_FLOPS`` where its float64 reference fits the host, else
    Freivalds'."""
    if asked not in CHECKS:
        raise ValueError(f"unknown check {asked!r}; known: {', '.join(CHECKS)}")
    if asked != AUTO:
        return asked
    return FULL if point_flops <= FREIVALDS_ABOVE_FLOPS and full_fits else FREIVALDS


@dataclasses.dataclass(frozen=True)
class Reference:
    """The exact-enough product and the per-element scale of its tolerance."""

    product: np.ndarray  # float64 A @ B (per op)
    magnitude: np.ndarray  # float64 |A| @ |B| (per op)
    K: int  # terms per sum, for the tolerance
    exact: bool = False  # integer operands: the result must be equal

    @classmethod
    def of(cls, A: np.ndarray, B: np.ndarray, op: str | Operation = "mm") -> Reference:
        product, magnitude, terms = operation(op).reference(
            A.astype(np.float64), B.astype(np.float64)
        )
        return cls(product, magnitude, terms, A.dtype.kind in "iu")


@dataclasses.dataclass(frozen=True)
class Freivalds:
    """What Freivalds' check compares a result with (module docstring): per product of
    the batch, s random sign vectors and A·(B·x) for each, and per row of the output
    the two magnitudes its bound scales with."""

    vectors: Array  # b×N'×s, ±1 (float64)
    product: Array  # b×M'×s, float64 A·(B·x) (folded for rmm)
    l1: Array  # b×M', |A|·(|B|·1): the row sums of |A|·|B|
    l2: Array  # b×M', |A|·w, w_k = ‖B's row k‖₂: at least the rows' 2-norms of |A|·|B|
    shape: tuple[int, ...]  # the result's shape
    K: int  # terms per sum, for the tolerance (4·K for rmm)
    reference_terms: int  # float64 roundings in each element of ``product``: N + K + 2
    exact: bool = False  # integer operands: the result must be equal
    rows: Array | None = None  # b×R: rows of each product checked in full
    row_product: Array | None = None  # b×R×N', float64: those rows of the product
    row_magnitude: Array | None = None  # b×R×N': their |A|·|B|

    @classmethod
    def of(
        cls,
        A: np.ndarray,
        B: np.ndarray,
        op: str | Operation = "mm",
        seed: int = 0,
        vectors: int = FREIVALDS_VECTORS,
    ) -> Freivalds:
        """The vectors (seeded by ``seed`` and the sizes) and A·(B·x), without a float64
        copy of A or B."""
        op = operation(op)
        shape = op.output_shape(A, B)
        A3, B3 = _stacked(A), _stacked(B)
        batch, M, K = A3.shape
        N = B3.shape[-1]
        rng = np.random.default_rng([seed, batch, M, K, N, A.dtype.num, 0x46524556])
        signs = rng.integers(0, 2, (batch, shape[-1], vectors)).astype(np.float64) * 2 - 1
        spread = op.spread(signs)
        parts = [_sketch(op, A3[i], B3[i], spread[i]) for i in range(batch)]
        product, l1, l2 = (np.stack(found) for found in zip(*parts, strict=True))
        exact = A.dtype.kind in "iu"
        picked = min(FREIVALDS_ROWS, shape[-2])
        rows = np.stack([rng.choice(shape[-2], picked, replace=False) for _ in range(batch)])
        full = [_full_rows(op, A3[i], B3[i], rows[i]) for i in range(batch)]
        row_product, row_magnitude = (np.stack(found) for found in zip(*full, strict=True))
        return cls(
            signs, product, l1, l2, shape, op.terms(K), N + K + 2, exact,
            rows, row_product, row_magnitude,
        )  # fmt: skip


def _stacked(matrix: Array) -> Array:
    """The matrices of an operand as a stack (b×rows×columns): a view, in its own type."""
    return matrix.reshape(-1, *matrix.shape[-2:])


def _row_blocks(matrix: Array) -> Iterator[Array]:
    """A matrix's blocks of rows, each converted to float64: never a copy of the whole."""
    step = max(1, CHUNK_ELEMENTS // max(1, matrix.shape[-1]))
    for start in range(0, matrix.shape[0], step):
        yield matrix[start : start + step].astype(np.float64)


def _sketch(op: Operation, A: Array, B: Array, spread: Array) -> tuple[Array, Array, Array]:
    """One product's A·(B·x) for every vector, l1 and l2 (see ``Freivalds``)."""
    products, norms, sums = [], [], []
    for block in _row_blocks(B):
        products.append(block @ spread)
        absolute = np.abs(block)
        norms.append(np.linalg.norm(op.fold_columns(absolute), axis=1))
        sums.append(absolute.sum(axis=1))  # folding columns keeps a row's sum
    Bx = np.concatenate(products)
    weights = np.stack([np.concatenate(sums), np.concatenate(norms)], axis=1)
    products, magnitudes = [], []
    for block in _row_blocks(A):
        products.append(block @ Bx)
        magnitudes.append(np.abs(block) @ weights)
    ABx = op.fold_rows(np.concatenate(products))
    magnitude = op.fold_rows(np.concatenate(magnitudes))
    return ABx, magnitude[:, 0], magnitude[:, 1]


def _full_rows(op: Operation, A: Array, B: Array, rows: Array) -> tuple[Array, Array]:
    """Output rows ``rows`` of one product in float64, and their magnitudes |A|·|B|,
    from the rows of A they are made of and B a block of rows at a time."""
    feeding = 2 if op.reduced else 1  # rows of A folded into one output row
    source = (rows[:, None] * feeding + np.arange(feeding)).ravel()
    A_rows = A[source].astype(np.float64)
    folded, folded_abs = op.fold_rows(A_rows), op.fold_rows(np.abs(A_rows))
    product = np.zeros((len(rows), op.fold_columns(B[:1]).shape[-1]))
    magnitude = np.zeros_like(product)
    start = 0
    for block in _row_blocks(B):
        end = start + block.shape[0]
        product += folded[:, start:end] @ op.fold_columns(block)
        magnitude += folded_abs[:, start:end] @ op.fold_columns(np.abs(block))
        start = end
    return product, magnitude


@dataclasses.dataclass(frozen=True)
class Check:
    equal: bool
    max_abs_error: float  # NaN if the result holds NaN; Freivalds': the largest |residual|
    bound_ratio: float  # largest |error| / tolerance: 1.0 is the edge
    nan_count: int
    method: str = FULL  # which check: "full" or "freivalds"

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def tolerance_factor(K: int) -> float:
    """f(K) of the module docstring: K up to 16, 4·sqrt(K) beyond."""
    return float(K) if K <= 16 else 4.0 * math.sqrt(K)


def check(result: np.ndarray, reference: Reference | Freivalds) -> Check:
    """Compare a result with the reference under the tolerance of the module docstring
    (with Freivalds' method where ``reference`` is a :class:`Freivalds`)."""
    if isinstance(reference, Freivalds):
        return _check_freivalds(result, reference)
    if result.shape != reference.product.shape:
        return Check(False, float("nan"), float("inf"), 0)
    if reference.exact:
        error = np.abs(result.astype(np.float64) - reference.product)
        largest = float(error.max()) if error.size else 0.0
        # Integers must be equal: the tolerance is half a unit.
        return Check(largest == 0.0, largest, largest / 0.5, 0)
    if result.size == 0:
        return Check(True, 0.0, 0.0, 0)
    scale = tolerance_factor(reference.K) * float(np.finfo(result.dtype).eps)
    tiny = float(np.finfo(result.dtype).tiny)
    found, product = result.reshape(-1), reference.product.reshape(-1)
    magnitude = np.broadcast_to(reference.magnitude, result.shape).reshape(-1)

    def part(start: int, stop: int) -> tuple[float, float, int]:
        return _checked_part(found[start:stop], product[start:stop], magnitude[start:stop],
                             scale, tiny)  # fmt: skip

    parts = _parts(found.size)
    if len(parts) == 1:
        done = [part(*parts[0])]
    else:
        starts, stops = zip(*parts, strict=True)
        done = list(_check_pool().map(part, starts, stops))
    nan_count = sum(count for _, _, count in done)
    if nan_count:
        return Check(False, float("nan"), float("inf"), nan_count)
    ratio = float(np.max([ratio for _, ratio, _ in done]))
    return Check(ratio <= 1.0, float(np.max([largest for largest, _, _ in done])), ratio, 0)


def _checked_part(
    found: np.ndarray, product: np.ndarray, magnitude: np.ndarray, scale: float, tiny: float
) -> tuple[float, float, int]:
    """(largest |error|, largest |error| / tolerance, elements not finite) of one part of
    a full check, a chunk at a time in two buffers that stay in the cache.

    The whole arrays' float64 temporaries took 2-3 times as long at 4096² (0.14-0.24 s
    against 0.07-0.08 s, a check of each of a point's two results): host work that
    every point waits for. A chunk's elements are tested for being finite only where
    its largest error is not (a NaN or an infinity in the chunk makes it so)."""
    largests, ratios = [], []  # each chunk's; np.max of them keeps a NaN, as max() would not
    nan_count = 0
    error = np.empty(min(found.size, _CHECK_CHUNK), np.float64)
    bound = np.empty_like(error)
    for start in range(0, found.size, _CHECK_CHUNK):
        part = found[start : start + _CHECK_CHUNK]
        e, b = error[: part.size], bound[: part.size]
        np.subtract(part, product[start : start + part.size], out=e, dtype=np.float64)
        np.abs(e, out=e)
        largests.append(e.max())
        if not math.isfinite(largests[-1]):
            nan_count += int(np.count_nonzero(~np.isfinite(part)))
        np.multiply(magnitude[start : start + part.size], scale, out=b)
        b += tiny
        np.divide(e, b, out=e)
        ratios.append(e.max())
    return float(np.max(largests)), float(np.max(ratios)), nan_count


def _parts(size: int) -> list[tuple[int, int]]:
    """Where a full check of ``size`` elements is split between threads: parts of whole
    chunks, at most ``_check_threads()`` of them."""
    chunks = -(-size // _CHECK_CHUNK)
    count = max(1, min(_check_threads(), chunks))
    edges = [(chunks * i // count) * _CHECK_CHUNK for i in range(count + 1)]
    return [(edges[i], min(edges[i + 1], size)) for i in range(count)]


def _check_threads() -> int:
    """The threads a full check is split between: this process's cores, at most
    ``_CHECK_THREADS``."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, _CHECK_THREADS))


_POOL: concurrent.futures.ThreadPoolExecutor | None = None


def _check_pool() -> concurrent.futures.ThreadPoolExecutor:
    """The threads of full checks, made at the first check that splits (NumPy's loops
    let go of the GIL, so parts of one check run at once)."""
    global _POOL
    if _POOL is None:
        _POOL = concurrent.futures.ThreadPoolExecutor(_CHECK_THREADS, "xbackend-check")
    return _POOL


def _forget_pool() -> None:
    """In a forked child: the parent's threads are not there, so a pool of its own."""
    global _POOL
    _POOL = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _gamma(terms: int) -> float:
    """γ_n: the relative rounding bound of a float64 sum of n products."""
    return terms * _UNIT_ROUNDOFF / (1 - terms * _UNIT_ROUNDOFF)


def _check_freivalds(result: np.ndarray, sketch: Freivalds) -> Check:
    """Freivalds' check of the module docstring: C·x against A·(B·x), row by row."""
    if result.shape != sketch.shape:
        return Check(False, float("nan"), float("inf"), 0, FREIVALDS)
    if result.size == 0:
        return Check(True, 0.0, 0.0, 0, FREIVALDS)
    stack = _stacked(result)
    products, sums, nan_count = [], [], 0
    for matrix, vectors in zip(stack, sketch.vectors, strict=True):
        for block in _row_blocks(matrix):
            nan_count += int(np.count_nonzero(~np.isfinite(block)))
            products.append(block @ vectors)
            sums.append(np.abs(block).sum(axis=1))
    if nan_count:
        return Check(False, float("nan"), float("inf"), nan_count, FREIVALDS)
    residual = np.abs(np.concatenate(products).reshape(sketch.product.shape) - sketch.product)
    row_sums = np.concatenate(sums).reshape(sketch.l1.shape)  # |C|·1
    rounding = _gamma(result.shape[-1] + 1) * row_sums
    rounding += _gamma(sketch.reference_terms) * sketch.l1
    if sketch.exact:
        # Integers must be equal: half a unit, and float64's rounding where it has any.
        exact = max(float(sketch.l1.max()), float(row_sums.max())) < _EXACT_BELOW
        bound = 0.5 + (0.0 if exact else rounding)
    else:
        eps = float(np.finfo(result.dtype).eps)
        spread = np.minimum(sketch.l1, FREIVALDS_TAIL * sketch.l2)
        bound = tolerance_factor(sketch.K) * eps * spread + rounding
        bound += np.finfo(result.dtype).tiny
    ratio = float(np.max(residual / np.asarray(bound)[..., None]))
    ratio = float(np.max([ratio, _rows_ratio(stack, sketch)]))  # a NaN kept, as max() would not
    # A NaN residual (from non-finite operands) fails: NaN <= 1 is false.
    return Check(ratio <= 1.0, float(residual.max()), ratio, 0, FREIVALDS)


def _rows_ratio(stack: Array, sketch: Freivalds) -> float:
    """The largest error over its tolerance in the rows checked in full (the full check's
    tolerance, element by element)."""
    if sketch.rows is None or sketch.row_product is None or sketch.row_magnitude is None:
        return 0.0
    picked = np.take_along_axis(stack, sketch.rows[..., None], axis=1).astype(np.float64)
    error = np.abs(picked - sketch.row_product)
    if sketch.exact:
        return float(error.max()) / 0.5
    eps = float(np.finfo(stack.dtype).eps)
    bound = tolerance_factor(sketch.K) * eps * sketch.row_magnitude + np.finfo(stack.dtype).tiny
    return float(np.max(error / bound))
