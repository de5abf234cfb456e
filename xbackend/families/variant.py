"""One way of computing an operation: a variant, as a family manifest declares it.

A compiled variant names its kernel, its family (the folder of its sources), how it is
launched (``geometry``) and what its builds take; a library line (the vendor's GEMM,
NumPy) has no kernel. Sizes and rules are small expressions of the launch's names
(``expressions.py``), evaluated per tile by ``names_at``.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterator, Mapping
from typing import Any

import xbackend.families.expressions as expressions
from xbackend.errors import UnsupportedParameter

# How a variant's kernels are launched, by name (launches/geometries.py registers them):
# "element", the default, launches them as the manifest writes; "block-tiles" is
# kernels/mm_warp's, its block tiles and split along K chosen per product.
ELEMENT = "element"
# The names a kernel parameter can be bound to: the operands, the output and their sizes
# (leading dimensions and batch strides in elements).
ARGUMENTS = (
    "A", "B", "C", "M", "N", "K", "lda", "ldb", "ldc", "strideA", "strideB", "strideC",
)  # fmt: skip
BUFFERS = ("A", "B", "C")
# The names of a product's sizes, which launches, builds, arguments and rules may use:
# A is M×K, B is K×N, BATCH products (1 but for bmm), C ROWS×COLUMNS (M×N but for rmm).
SIZES = ("M", "N", "K", "BATCH", "ROWS", "COLUMNS")
# How an operand may be stored for a kernel (``storage``): element (i, j) of an R×C
# matrix at [i·C + j] (row-major, the default) or at [j·R + i] (column-major).
STORAGES = ("row-major", "column-major")
Value = str | int | float  # what a kernel parameter takes: a name, an expression, a number


@dataclasses.dataclass(frozen=True)
class Launch:
    """One launch of a variant: its kernel, and (empty: the variant's default geometry)
    the workers per group and the groups along each axis, as expressions of the launch's
    names (the tile, the parameters, the constants; the grid also the sizes)."""

    kernel: str
    group: tuple[str | int, ...] = ()
    grid: tuple[str | int, ...] = ()
    # Kernel parameter -> what it takes (``takes``); a parameter not named takes itself.
    arguments: Mapping[str, Value] = dataclasses.field(default_factory=dict)

    @property
    def function(self) -> str:
        """The kernel function's name: ``mm<REAL>`` is the template ``mm``."""
        return self.kernel.split("<", 1)[0].strip()

    @property
    def template(self) -> str:
        """The template arguments written, ``REAL`` in ``mm<REAL>``; "" for a function."""
        return self.kernel.partition("<")[2].rpartition(">")[0].strip()

    def takes(self, parameter: str) -> Value:
        """What the kernel's ``parameter`` is bound to."""
        return self.arguments.get(parameter, parameter)


# The lines the backends add themselves, beside the families' (the vendor library's GEMM):
# a user's variant never takes one of these names.
LIBRARY_LINES = ("vendor",)


@dataclasses.dataclass(frozen=True)
class VariantSpec:
    """One way of computing an operation on a backend."""

    name: str
    description: str
    kernel: str = ""  # the kernel function; "" for a library line
    family: str = ""  # the family whose sources hold the kernel
    tiles: tuple[int, ...] = ()  # tile sizes to consider; empty: takes no tile
    default_tile: int | None = None
    geometry: str = ""  # a registered geometry's name; "" for a library line
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
    # Parameters beyond the tile, each with the values ``tune`` may try (its space), and
    # the value of each a run takes unless told (the first listed, or ``defaults``).
    parameters: tuple[tuple[str, tuple[int, ...]], ...] = ()
    defaults: Mapping[str, int] = dataclasses.field(default_factory=dict)
    group: tuple[str | int, ...] = ()  # workers per group along x, y, z; () the default
    grid: tuple[str | int, ...] = ()  # groups along x, y, z; () the default
    storage: Mapping[str, str] = dataclasses.field(default_factory=dict)  # operand -> STORAGES
    workspaces: tuple[tuple[str, str | int], ...] = ()  # buffer -> elements (an expression)
    before: tuple[Launch, ...] = ()  # launches before the kernel's own, each run

    @property
    def launch(self) -> Launch:
        """The variant's own launch: its kernel, group, grid and arguments."""
        return Launch(self.kernel, self.group, self.grid, self.arguments)

    @property
    def launches(self) -> tuple[Launch, ...]:
        """Every launch of one product, in order: those ``before`` and its own."""
        return (*self.before, self.launch)

    def configuration(
        self, tile: int | None, params: Mapping[str, int] | None = None
    ) -> dict[str, int]:
        """The values a run at ``tile`` with ``params`` takes: its tile (where it takes
        one) and every parameter, ``params``' or the default."""
        found = {"TILE": tile} if tile is not None and self.takes_tile else {}
        given = {key: value for key, value in (params or {}).items() if key != "TILE"}
        return {**found, **self.defaults, **given}

    def configured_tile(
        self, tile: int | None, params: Mapping[str, int], backend: str = ""
    ) -> int | None:
        """The tile of a configuration (``{'TILE': n}`` and the family's parameters), each
        parameter checked to be one it declares with one of its values."""
        declared = dict(self.parameters)
        known = {"TILE"} if self.takes_tile else set()
        where = f"{backend} {self.name}".strip()
        for name, value in params.items():
            if name not in known | set(declared):
                takes = ", ".join(sorted(known | set(declared))) or "none"
                raise UnsupportedParameter(f"{where} takes no parameter {name} (it takes: {takes})")
            if name in declared and value not in declared[name]:
                listed = list(declared[name])
                raise UnsupportedParameter(f"{where}: {name} = {value} is not one of {listed}")
        if "TILE" in params and tile not in (None, params["TILE"]):
            raise UnsupportedParameter(f"{where}: tile {tile} and TILE = {params['TILE']}")
        return params.get("TILE", tile)

    def space(self) -> Iterator[dict[str, int]]:
        """Every configuration ``tune`` may try: each tile with each combination of the
        parameters' values (the rules, ``requires``, are the device's to check)."""
        names = [name for name, _ in self.parameters]
        tiles: tuple[int | None, ...] = self.tiles or (None,)
        for tile in tiles:
            for values in itertools.product(*(values for _, values in self.parameters)):
                yield self.configuration(tile, dict(zip(names, values, strict=True)))

    def per_thread(
        self, tile: int | None, params: Mapping[str, int] | None = None
    ) -> tuple[int, int]:
        """(TM, TN): the patch of C each worker computes at this tile."""
        values = {**self.constants, **self.configuration(tile, params)}
        rows, columns = (expressions.evaluate(size, values) for size in self.patch)
        return int(rows), int(columns)

    def names_at(self, tile: int | None, params: Mapping[str, int] | None = None) -> dict[str, int]:
        """The names a rule or size of this variant may use, at ``tile`` with ``params``:
        TILE, TM, TN, THREADS (workers per group), the constants and the parameters."""
        rows, columns = self.per_thread(tile, params)
        names = {"TM": rows, "TN": columns, **self.constants, **self.configuration(tile, params)}
        if self.group:
            threads = math.prod(expressions.evaluate(size, names) for size in self.group)
        elif tile is not None and rows > 0 and columns > 0:
            threads = (tile // rows) * (tile // columns)
        else:
            threads = 0
        return {"TILE": tile or 0, **names, "THREADS": threads}

    @property
    def size_rules(self) -> tuple[str, ...]:
        """The rules on the sizes a kernel accepts (they name M, N, K, ...), held at
        each product; the others are rules of a configuration, held on each device."""
        return tuple(rule for rule in self.requires if expressions.names(rule) & set(SIZES))

    @property
    def configuration_rules(self) -> tuple[str, ...]:
        return tuple(rule for rule in self.requires if rule not in self.size_rules)

    def expression_problem(
        self, tile: int | None, params: Mapping[str, int] | None = None
    ) -> str | None:
        """Why this variant's sizes cannot be worked out at ``tile`` (a ``build``, ``staged``
        ``group`` or ``patch`` that divides by zero or unevenly, a rule that does), naming
        the manifest; None where every one has a value. What names a size is left to
        each product."""
        try:
            names = self.names_at(tile, params)
            values = (*(v for _, v in self.build if v != "REAL"), self.staged, *self.group)
            for value in (*values, *self.configuration_rules):
                if isinstance(value, int) or not expressions.names(value) & set(SIZES):
                    expressions.evaluate(value, names)
        except expressions.ExpressionError as error:
            where = f"tile {tile}" if tile is not None else _shown(self.configuration(tile, params))
            return f"{where}: {error} ({self.source or 'its manifest'})"
        return None

    def takes(self, parameter: str) -> Value:
        """What the kernel's ``parameter`` is bound to."""
        return self.arguments.get(parameter, parameter)

    @property
    def takes_tile(self) -> bool:
        return bool(self.tiles)

    @property
    def tile(self) -> int | None:
        """The tile a run takes where none is asked for nor tuned: ``default_tile``, else
        the first of ``tiles``; None for a variant that takes none."""
        if self.default_tile is not None:
            return self.default_tile
        return self.tiles[0] if self.tiles else None

    @property
    def configurable(self) -> bool:
        """Whether a run names its configuration by parameters beyond a tile."""
        return bool(self.parameters)

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


def broken_rule(rules: tuple[str, ...], names: Mapping[str, int], where: str = "") -> str | None:
    """The first of a family's ``rules`` that does not hold with ``names``, said with the
    values it read (``its family's rule K % TS == 0 does not hold (K = 14, TS = 16)``),
    or why it has no value (after ``where``, the tile, where it is given); None where all
    hold."""
    for rule in rules:
        try:
            holds = expressions.evaluate(rule, names)
        except expressions.ExpressionError as error:
            return f"{where}: {error}" if where else f"its family's rule {rule}: {error}"
        if not holds:
            used = ", ".join(f"{n} = {names[n]}" for n in sorted(expressions.names(rule)))
            return f"its family's rule {rule} does not hold ({used})"
    return None


def _shown(values: Mapping[str, int]) -> str:
    return ", ".join(f"{name} = {value}" for name, value in values.items())


# operation -> variant name -> spec
VariantTable = dict[str, dict[str, VariantSpec]]
