"""The products of the kernel files, planned: which launches, on which buffers.

``element.py`` plans the "element" families (kernels/mm, mm_reg, rmm and a user's);
``block_tiles.py`` the tuned one (mm_warp), with the sum of a split along K as a second
launch; ``plan_vendor`` here the vendor's GEMM, after rmm's pair sums where reduced.

Each planner also says how wide the kernels' element offsets are. The default build
computes them with 32-bit ints, the fast path; a product whose kernels would form an
offset past 2^31 - 1 (``INDEX_MAX``) gets the wide build instead (``WIDE_INDEX``:
64-bit offsets, leading dimensions and strides). The ``*_reach`` functions give the
farthest offset each family forms, from the sizes alone: the last element of every
buffer, and the few past it that the edge tiles form without reading them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from xbackend.launches.kernels import (
    C_TYPES,
    SUM_BLOCK,
    WIDE_INDEX,
)
from xbackend.launches.launch import OUTPUT, Buffer, KernelLaunch, LibraryCall, Product
from xbackend.launches.operands import INDEX_MAX, row_major_span
from xbackend.operations import Operation, operation

Array = np.ndarray[Any, Any]
A, B, C = Buffer("A"), Buffer("B"), Buffer(OUTPUT)


def _blocks(n: int, size: int) -> int:
    return -(-n // size)


def _last(rows: int, ld: int, columns: int, count: int = 1, stride: int = 0) -> int:
    """The offset of the last element of ``count`` rows×columns matrices, ``stride``
    apart, their rows ``ld`` apart."""
    return max(count - 1, 0) * stride + max(rows - 1, 0) * ld + max(columns - 1, 0)


@dataclasses.dataclass(frozen=True)
class Layout:
    """The operands as the kernels read them: host spans to upload, their sizes by the
    kernels' names (M, N, K of the operands; lda, ldb, ldc; the batch strides), and the
    rows and columns of each product's output."""

    A: Array
    B: Array
    batch: int
    sizes: dict[str, int]
    output: tuple[int, int]

    @classmethod
    def of(cls, op: Operation, A: Array, B: Array) -> Layout:
        rows, columns = op.output_shape(A, B)[-2:]
        if op.batched:
            batch, M, K = A.shape
            N = B.shape[2]
            spans = np.ascontiguousarray(A).reshape(-1), np.ascontiguousarray(B).reshape(-1)
            strides = {"strideA": M * K, "strideB": K * N, "strideC": M * N}
            sizes = {"M": M, "N": N, "K": K, "lda": K, "ldb": N, "ldc": N, **strides}
            return cls(*spans, batch, sizes, (rows, columns))
        (a_span, lda), (b_span, ldb) = row_major_span(A), row_major_span(B)
        (M, K), N = A.shape, B.shape[1]
        strides = {"strideA": 0, "strideB": 0, "strideC": 0}
        sizes = {"M": M, "N": N, "K": K, "lda": lda, "ldb": ldb, "ldc": columns, **strides}
        return cls(a_span, b_span, 1, sizes, (rows, columns))

    @property
    def inputs(self) -> dict[str, Array]:
        return {"A": self.A, "B": self.B}

    def operand_reach(self, extra_columns: int = 0, extra_rows: int = 0) -> int:
        """The farthest offset in A (``extra_columns`` past its rows' ends) or in B
        (``extra_rows`` below its last row), batch offsets included."""
        s, count = self.sizes, self.batch
        return max(
            _last(s["M"], s["lda"], s["K"] + extra_columns, count, s["strideA"]),
            _last(s["K"] + extra_rows, s["ldb"], s["N"], count, s["strideB"]),
        )


def tiled_reach(layout: Layout, tile: int, reduced: bool) -> int:
    """The farthest element offset a fixed-tile kernel (kernels/mm, mm_reg, rmm) forms:
    the last element of A, B and C; for the reduced product also rmm_tiled's 2·row·lda
    of the threads below the last row (the naive kernels, which return first, are held
    to the same bound)."""
    s, (rows, columns) = layout.sizes, layout.output
    reach = max(
        layout.operand_reach(),
        _last(rows, s["ldc"], columns, layout.batch, s["strideC"]),
    )
    if reduced:
        reach = max(reach, 2 * (_blocks(rows, tile) * tile - 1) * s["lda"])
    return reach


def pair_sums_reach(layout: Layout) -> int:
    """The farthest element offset rmm_pair_sums forms: the operands' last elements, the
    number of pair sums and its threads (in whole blocks)."""
    (rows, columns), K = layout.output, layout.sizes["K"]
    sums = max(rows * K, K * columns)
    return max(layout.operand_reach(), sums, _blocks(sums, SUM_BLOCK) * SUM_BLOCK - 1)


def index_options(reach: int, wide: bool = False) -> tuple[str, ...]:
    """``WIDE_INDEX`` where a product's farthest offset passes 32-bit ints, or where
    ``wide`` asks for it (the tests and scripts/index_cost.py); else nothing."""
    return (WIDE_INDEX,) if wide or reach > INDEX_MAX else ()


def plan_vendor(op: str | Operation, A_: Array, B_: Array, wide: bool = False) -> Product:
    """The vendor's GEMM on the operands as they lie; for rmm, on their pair sums,
    which kernels/rmm's rmm_pair_sums first writes into matrices of their own (with
    64-bit offsets where the product needs them, or ``wide`` asks for them). The
    library's own limits are the backend's to check (``_check_product``)."""
    op = operation(op)
    layout = Layout.of(op, A_, B_)
    shape = op.output_shape(A_, B_)
    sizes = layout.sizes
    if not op.reduced:
        gemm = LibraryCall.gemm(
            M=sizes["M"], N=sizes["N"], K=sizes["K"], A=A, lda=sizes["lda"], B=B,
            ldb=sizes["ldb"], C=C, ldc=sizes["ldc"],
        )  # fmt: skip
        return Product(layout.inputs, shape, A_.dtype, (gemm,))
    rows, columns = shape
    K, lda, ldb = sizes["K"], sizes["lda"], sizes["ldb"]
    options = (
        f"-DREAL={C_TYPES[A_.dtype.name]}",
        f"-DSUM_BLOCK={SUM_BLOCK}",
        *index_options(pair_sums_reach(layout), wide),
    )

    def pair_sums(source: Buffer, target: Buffer, *extent: int) -> KernelLaunch:
        height, width, row_step, col_step, partner = extent
        return KernelLaunch.of(
            "rmm_pair_sums", "rmm", options,
            grid=(_blocks(height * width, SUM_BLOCK), 1, 1), block=(SUM_BLOCK, 1, 1), dims=1,
            X=source, S=target, rows=height, cols=width,
            row_step=row_step, col_step=col_step, partner=partner,
        )  # fmt: skip

    rows_summed, columns_summed = Buffer("summed_rows"), Buffer("summed_columns")
    steps = (
        pair_sums(A, rows_summed, rows, K, 2 * lda, 1, lda),
        pair_sums(B, columns_summed, K, columns, ldb, 2, 1),
        LibraryCall.gemm(
            M=rows,
            N=columns,
            K=K,
            A=rows_summed,
            lda=K,
            B=columns_summed,
            ldb=columns,
            C=C,
            ldc=columns,
        ),
    )
    item = A_.itemsize
    workspaces = {rows_summed.name: rows * K * item, columns_summed.name: K * columns * item}
    return Product(layout.inputs, shape, A_.dtype, steps, workspaces)
