"""The operations: shapes, operation counts, seeded inputs, the reference and the check.

Three operations, each on int32, float32 or float64 operands:

* ``mm``:  C = A · B, A M×K, B K×N;
* ``bmm``: a batch of them, A b×M×K, B b×K×N;
* ``rmm``: the reduced product, for even M and N: C is (M/2)×(N/2) and
  ``C[i, j] = (A[2i] + A[2i+1]) · (B[:, 2j] + B[:, 2j+1])``, the sum of a 2×2
  block of A · B.

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

OPS = ("mm", "bmm", "rmm")
DTYPES: dict[str, np.dtype] = {
    "int32": np.dtype(np.int32),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
}


def dtype_named(name: str) -> np.dtype:
    """The NumPy dtype for a name xbackend supports, or an error listing them."""
    if name not in DTYPES:
        raise ValueError(f"unsupported dtype {name!r}; supported: {', '.join(DTYPES)}")
    return DTYPES[name]


@dataclasses.dataclass(frozen=True, order=True)
class Shape:
    """A product A (M×K) · B (K×N) = C (M×N)."""

    M: int
    K: int
    N: int

    def __post_init__(self) -> None:
        if min(self.M, self.K, self.N) < 1:
            raise ValueError(f"every dimension must be at least 1: {self}")

    @property
    def flops(self) -> int:
        """Floating-point operations of the product: one multiply and one add per term."""
        return 2 * self.M * self.N * self.K

    @property
    def outputs(self) -> int:
        return self.M * self.N

    def min_bytes(self, itemsize: int = 4) -> int:
        """Fewest bytes a device must move: each input read once, the output written once."""
        return itemsize * (self.M * self.K + self.K * self.N + self.M * self.N)

    def __str__(self) -> str:
        return f"{self.M}×{self.K} · {self.K}×{self.N}"


def output_size(op: str, shape: Shape) -> tuple[int, int]:
    """Rows and columns of one product's result: for rmm, (M/2)×(N/2)."""
    return (shape.M // 2, shape.N // 2) if op == "rmm" else (shape.M, shape.N)


def flops(op: str, shape: Shape, batch: int = 1) -> int:
    """Nominal operation count: 2·M·N·K per product; for rmm, of the half-size product.

    The rmm count is the same for every variant (naive4 multiplies four times as
    often), so its GFLOP/s compare like its times.
    """
    rows, columns = output_size(op, shape)
    return (batch if op == "bmm" else 1) * 2 * rows * columns * shape.K


def make_operands(
    shape: Shape, seed: int, dtype: np.dtype | type = np.float32, batch: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Fresh random operands, the same for the same seed, shape, dtype and batch.

    Floats are uniform in [-1, 1); integers uniform in [-8, 8], small enough that
    no sum of up to 2**20 products overflows int32. With ``batch`` the operands
    are b×M×K and b×K×N.
    """
    dtype = np.dtype(dtype)
    rng = np.random.default_rng([seed, shape.M, shape.K, shape.N, batch or 0, dtype.num])
    lead = () if batch is None else (batch,)
    a_shape, b_shape = (*lead, shape.M, shape.K), (*lead, shape.K, shape.N)
    if dtype.kind == "i":
        return (
            rng.integers(-8, 9, a_shape).astype(dtype),
            rng.integers(-8, 9, b_shape).astype(dtype),
        )
    A = rng.uniform(-1.0, 1.0, a_shape).astype(dtype)
    B = rng.uniform(-1.0, 1.0, b_shape).astype(dtype)
    return A, B


@dataclasses.dataclass(frozen=True)
class Reference:
    """The exact-enough product and the per-element scale of its tolerance."""

    product: np.ndarray  # float64 A @ B (per op)
    magnitude: np.ndarray  # float64 |A| @ |B| (per op)
    K: int  # terms per sum, for the tolerance
    exact: bool = False  # integer operands: the result must be equal

    @classmethod
    def of(cls, A: np.ndarray, B: np.ndarray, op: str = "mm") -> Reference:
        A64 = A.astype(np.float64)
        B64 = B.astype(np.float64)
        exact = A.dtype.kind in "iu"
        K = A.shape[-1]
        if op == "rmm":
            # Pair sums of absolute values bound every one of the 4·K products.
            rows, columns = A64[0::2] + A64[1::2], B64[:, 0::2] + B64[:, 1::2]
            rows_abs = np.abs(A64[0::2]) + np.abs(A64[1::2])
            columns_abs = np.abs(B64[:, 0::2]) + np.abs(B64[:, 1::2])
            return cls(rows @ columns, rows_abs @ columns_abs, 4 * K, exact)
        return cls(A64 @ B64, np.abs(A64) @ np.abs(B64), K, exact)


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
