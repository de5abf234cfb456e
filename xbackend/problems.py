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
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from xbackend.operations import OPS, Operation, Shape, make_operands, operation

__all__ = [
    "DTYPES",
    "OPS",
    "Check",
    "Reference",
    "Shape",
    "check",
    "dtype_named",
    "flops",
    "make_operands",
    "output_size",
    "tolerance_factor",
]

DTYPES: dict[str, np.dtype] = {
    "int32": np.dtype(np.int32),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
}


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
class Check:
    equal: bool
    max_abs_error: float  # NaN if the result holds NaN
    bound_ratio: float  # largest |error| / tolerance: 1.0 is the edge
    nan_count: int

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def tolerance_factor(K: int) -> float:
    """f(K) of the module docstring: K up to 16, 4·sqrt(K) beyond."""
    return float(K) if K <= 16 else 4.0 * math.sqrt(K)


def check(result: np.ndarray, reference: Reference) -> Check:
    """Compare a result with the reference under the tolerance of the module docstring."""
    if result.shape != reference.product.shape:
        return Check(False, float("nan"), float("inf"), 0)
    if reference.exact:
        error = np.abs(result.astype(np.float64) - reference.product)
        largest = float(error.max()) if error.size else 0.0
        # Integers must be equal: the tolerance is half a unit.
        return Check(largest == 0.0, largest, largest / 0.5, 0)
    eps = float(np.finfo(result.dtype).eps)
    bound = tolerance_factor(reference.K) * eps * reference.magnitude
    bound += np.finfo(result.dtype).tiny
    error = np.abs(result.astype(np.float64) - reference.product)
    nan_count = int(np.count_nonzero(~np.isfinite(result)))
    if nan_count:
        return Check(False, float("nan"), float("inf"), nan_count)
    if error.size == 0:
        return Check(True, 0.0, 0.0, 0)
    ratio = float(np.max(error / bound))
    return Check(ratio <= 1.0, float(error.max()), ratio, 0)
