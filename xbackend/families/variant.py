"""One way of computing an operation: a variant, as a family manifest declares it.

A compiled variant names its kernel, its family (the folder of its sources), how it is
launched (``geometry``) and what its builds take; a library line (the vendor's GEMM,
NumPy) has no kernel. Sizes and rules are small expressions of the launch's names
(``expressions.py``), evaluated per tile by ``names_at``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import xbackend.families.expressions as expressions

# How a variant's kernels are launched (plans.py plans each):
# "element": one worker per element of C, or per TM×TN patch, in TILE×TILE-element groups;
# "block-tiles": kernels/mm_warp's block tiles with a split along K, tuned per product.
GEOMETRIES = ("element", "block-tiles")
# The names a kernel parameter can be bound to: the operands, the output and their sizes
# (leading dimensions and batch strides in elements).
ARGUMENTS = (
    "A", "B", "C", "M", "N", "K", "lda", "ldb", "ldc", "strideA", "strideB", "strideC",
)  # fmt: skip
BUFFERS = ("A", "B", "C")
# The lines the backends add themselves, beside the families' (the vendor library's GEMM;
# "blas": its older name in results files): a user's variant never takes one of these names.
LIBRARY_LINES = ("vendor", "blas")


@dataclasses.dataclass(frozen=True)
class VariantSpec:
    """One way of computing an operation on a backend."""

    name: str
    description: str
    kernel: str = ""  # the kernel function; "" for a library line
    family: str = ""  # the family whose sources hold the kernel
    tiles: tuple[int, ...] = ()  # tile sizes to consider; empty: takes no tile
    default_tile: int | None = None
    geometry: str = ""  # GEOMETRIES; "" for a library line
    # Outputs per worker along rows (TM) and columns (TN), as expressions of TILE.
    patch: tuple[str | int, str | int] = (1, 1)
    defines: tuple[str, ...] = ()  # switches: -DNAME, selecting the variant in its file
    # -DNAME=value options of every build: an expression, or "REAL" for the element type.
    build: tuple[tuple[str, str | int], ...] = ()
    constants: Mapping[str, int] = dataclasses.field(default_factory=dict)
    requires: tuple[str, ...] = ()  # rules of a tile, each true where it can run
    staged: str | int = 0  # elements one group stages in shared/local memory
    # Kernel parameter -> what it takes (ARGUMENTS); a parameter not named takes itself.
    arguments: Mapping[str, str] = dataclasses.field(default_factory=dict)
    dtypes: tuple[str, ...] = ()  # the element types its kernels compute in; empty: any
    x: str = "columns"  # what a launch's x axis runs along: "columns" or "rows" of C
    layout: str = ""  # block-tiles only: "block" (one group) or "warp" (warp tiles)
    source: str = ""  # the manifest that declared it; "" for the backends' own lines

    def per_thread(self, tile: int) -> tuple[int, int]:
        """(TM, TN): the patch of C each worker computes at this tile."""
        values = {"TILE": tile, **self.constants}
        rows, columns = (expressions.evaluate(size, values) for size in self.patch)
        return int(rows), int(columns)

    def names_at(self, tile: int) -> dict[str, int]:
        """The names a rule or size of this variant may use, at ``tile``: TILE, TM, TN,
        THREADS (workers per group) and the family's constants."""
        rows, columns = self.per_thread(tile)
        threads = (tile // rows) * (tile // columns) if rows > 0 and columns > 0 else 0
        return {"TILE": tile, "TM": rows, "TN": columns, "THREADS": threads, **self.constants}

    def expression_problem(self, tile: int) -> str | None:
        """Why this variant's sizes cannot be worked out at ``tile`` (a ``build``, ``staged``
        or ``patch`` that divides by zero or unevenly, a rule that does), naming the
        manifest; None where every one has a value."""
        try:
            names = self.names_at(tile)
            for value in (*(v for _, v in self.build if v != "REAL"), self.staged):
                expressions.evaluate(value, names)
            for rule in self.requires:
                expressions.evaluate(rule, names)
        except expressions.ExpressionError as error:
            return f"tile {tile}: {error} ({self.source or 'its manifest'})"
        return None

    def takes(self, parameter: str) -> str:
        """What the kernel's ``parameter`` is bound to."""
        return self.arguments.get(parameter, parameter)

    @property
    def takes_tile(self) -> bool:
        return bool(self.tiles)

    @property
    def tuned(self) -> bool:
        """Whether the launch parameters follow the shape (and ``xbackend tune``):
        asked for no tile, the variant picks its own per product."""
        return self.geometry == "block-tiles"

    @property
    def double_buffered(self) -> bool:
        return "DOUBLE_BUFFER" in self.defines

    @property
    def asynchronous(self) -> bool:
        """Whether its slabs are copied asynchronously, several in flight (a block-tiles
        variant's switch ASYNC; the stage count is a parameter of its configuration)."""
        return "ASYNC" in self.defines

    @property
    def user(self) -> bool:
        """Whether the variant comes from a user's folder, not with xbackend."""
        return bool(self.source) and not self.source.startswith("shipped:")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# operation -> variant name -> spec
VariantTable = dict[str, dict[str, VariantSpec]]
