"""The operations: shapes, operation counts, seeded inputs, the reference and the check.

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
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np


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


def make_operands(
    shape: Shape, seed: int, dtype: np.dtype | type = np.float32
) -> tuple[np.ndarray, np.ndarray]:
    """Fresh random operands, uniform in [-1, 1), the same for the same seed and shape."""
    rng = np.random.default_rng([seed, shape.M, shape.K, shape.N])
    A = rng.uniform(-1.0, 1.0, (shape.M, shape.K)).astype(dtype)
    B = rng.uniform(-1.0, 1.0, (shape.K, shape.N)).astype(dtype)
    return A, B


@dataclasses.dataclass(frozen=True)
class Reference:
    """The exact-enough product and the per-element scale of its rounding bound."""

    product: np.ndarray  # float64 A @ B
    magnitude: np.ndarray  # float64 |A| @ |B|
    K: int

    @classmethod
    def of(cls, A: np.ndarray, B: np.ndarray) -> Reference:
        A64 = A.astype(np.float64)
        B64 = B.astype(np.float64)
        return cls(A64 @ B64, np.abs(A64) @ np.abs(B64), A.shape[1])


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
    eps = float(np.finfo(result.dtype).eps)
    bound = tolerance_factor(reference.K) * eps * reference.magnitude
    bound += np.finfo(result.dtype).tiny
    error = np.abs(result.astype(np.float64) - reference.product)
    nan_count = int(np.count_nonzero(~np.isfinite(result)))
    if nan_count:
        return Check(False, float("nan"), float("inf"), nan_count)
    ratio = float(np.max(error / bound))
    return Check(ratio <= 1.0, float(error.max()), ratio, 0)
