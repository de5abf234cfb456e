"""The operations as data: what each product takes, gives, costs and is checked against.

Three operations, each on int32, float32 or float64 operands:

* ``mm``:  C = A · B, A M×K, B K×N;
* ``bmm``: a batch of them, A b×M×K, B b×K×N (the batch on the launch's z axis);
* ``rmm``: the reduced product, for even M and N: C is (M/2)×(N/2) and
  ``C[i, j] = (A[2i] + A[2i+1]) · (B[:, 2j] + B[:, 2j+1])``, the sum of a 2×2
  block of A · B.

The rest of xbackend asks an :class:`Operation` (``operation("rmm").reduced``,
``.output_size(shape)``, ``.flops(shape, batch)``) instead of comparing names, so
that a new product with kernels of its own is a new entry here plus its kernels
(``docs/architecture.md`` lists the files).
"""

from __future__ import annotations

import dataclasses
from typing import Any

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
    shape: Shape, seed: int, dtype: np.dtype[Any] | type = np.float32, batch: int | None = None
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
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


Array = np.ndarray[Any, Any]


@dataclasses.dataclass(frozen=True)
class Operation:
    """One product: its operands, its output, its cost, its reference and its rules."""

    name: str
    description: str
    batched: bool = False  # operands carry a leading batch axis (b×M×K · b×K×N)
    reduced: bool = False  # the output sums 2×2 blocks of A · B: (M/2)×(N/2), M and N even
    tuned_as: tuple[str, ...] = ()  # cached tuning choices it takes, its own first

    @property
    def ndim(self) -> int:
        """Dimensions of each operand: 3 with a batch axis, else 2."""
        return 3 if self.batched else 2

    def batch_of(self, batch: int) -> int:
        """The products one point of this operation computes at the plan's ``batch``."""
        return batch if self.batched else 1

    def output_size(self, shape: Shape) -> tuple[int, int]:
        """Rows and columns of one product's result."""
        return (shape.M // 2, shape.N // 2) if self.reduced else (shape.M, shape.N)

    def output_shape(self, A: Array, B: Array) -> tuple[int, ...]:
        """The result's array shape for operands ``A`` and ``B`` (checked already)."""
        rows, columns = A.shape[-2], B.shape[-1]
        if self.reduced:
            rows, columns = rows // 2, columns // 2
        return (*A.shape[:-2], rows, columns)

    def flops(self, shape: Shape, batch: int = 1) -> int:
        """Nominal operation count: 2·rows·columns·K per product of the output's size.

        For rmm that is the half-size product's count for every variant (naive4
        multiplies four times as often), so its GFLOP/s compare like its times.
        """
        rows, columns = self.output_size(shape)
        return self.batch_of(batch) * 2 * rows * columns * shape.K

    def elements(self, shape: Shape, batch: int = 1) -> tuple[int, int, int]:
        """Elements of A, B and C at one point."""
        rows, columns = self.output_size(shape)
        b = self.batch_of(batch)
        return b * shape.M * shape.K, b * shape.K * shape.N, b * rows * columns

    def min_bytes(self, shape: Shape, batch: int = 1, itemsize: int = 4) -> int:
        """Fewest bytes a device must move: each input read once, the output written once."""
        return itemsize * sum(self.elements(shape, batch))

    def shape_problem(self, M: int, N: int) -> str | None:
        """Why a product with M rows of A and N columns of B is not this operation's."""
        if self.reduced and (M % 2 or N % 2):
            return f"{self.name} needs even M and N"
        return None

    def operands(
        self, shape: Shape, seed: int, dtype: np.dtype[Any] | type, batch: int
    ) -> tuple[Array, Array]:
        """The seeded operands of one point."""
        return make_operands(shape, seed, dtype, batch if self.batched else None)

    def reference(self, A64: Array, B64: Array) -> tuple[Array, Array, int]:
        """The float64 product, the magnitude ``|A|·|B|`` its tolerance scales with,
        and the number of terms in each sum."""
        rows, columns = self.fold_rows(A64), self.fold_columns(B64)
        # For rmm, pair sums of absolute values bound every one of the 4·K products.
        magnitude = self.fold_rows(np.abs(A64)) @ self.fold_columns(np.abs(B64))
        return rows @ columns, magnitude, self.terms(A64.shape[-1])

    def terms(self, K: int) -> int:
        """Products added into each element of the output: for rmm 4·K (naive4 adds every
        product of the 2×2 block), else K."""
        return 4 * K if self.reduced else K

    def fold_rows(self, rows: Array) -> Array:
        """Rows (of A, or of A·B) summed as the output sums them: for rmm each pair, so
        that the output is ``fold_rows(A) · fold_columns(B)``."""
        return rows[..., 0::2, :] + rows[..., 1::2, :] if self.reduced else rows

    def fold_columns(self, columns: Array) -> Array:
        """Columns (of B) summed as the output sums them: for rmm each pair."""
        return columns[..., 0::2] + columns[..., 1::2] if self.reduced else columns

    def spread(self, vectors: Array) -> Array:
        """Vectors over the output's columns (…×N'×s) as vectors over B's columns, so that
        ``C · x = fold_rows(A · (B · spread(x)))``: for rmm each entry twice."""
        return np.repeat(vectors, 2, axis=-2) if self.reduced else vectors

    def pilot_shape(self, shape: Shape) -> Shape:
        """A quarter of each dimension, for the run that predicts a first large point
        (even where the operation needs even dimensions)."""

        def quarter(n: int) -> int:
            return max(2, n // 8 * 2) if self.reduced else max(1, n // 4)

        return Shape(quarter(shape.M), quarter(shape.K), quarter(shape.N))

    def title(self, batch: int = 1) -> str:
        """How tables and figures name it: ``mm``, ``bmm ×8``, ``rmm``."""
        return f"{self.name} ×{batch}" if self.batched else self.name


MM = Operation("mm", "matrix product C = A · B", tuned_as=("mm",))
BMM = Operation("bmm", "a batch of matrix products, b×M×K · b×K×N", batched=True)
RMM = Operation(
    "rmm",
    "reduced product: C[i, j] = (A[2i] + A[2i+1]) · (B[:, 2j] + B[:, 2j+1])",
    reduced=True,
    tuned_as=("rmm", "mm"),
)
OPERATIONS: dict[str, Operation] = {op.name: op for op in (MM, BMM, RMM)}
OPS = tuple(OPERATIONS)
DEFAULT = MM.name


def operation(name: str | Operation) -> Operation:
    """The operation called ``name``, or a ValueError listing the known ones."""
    if isinstance(name, Operation):
        return name
    try:
        return OPERATIONS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown operation {name!r}; known: {', '.join(OPS)}") from None
