"""The "element" geometry: launches as a family's manifest writes them.

A variant of this geometry (kernels/mm, mm_reg, rmm, and every user's family) is one
kernel launch, or several (``before``, then its own), each with its group and grid as
expressions of the configuration (the tile, the parameters, the constants) and of the
product's sizes (``SIZES``); without them, the default: one worker per TM×TN patch of a
TILE×TILE tile of C, x along C's columns. Its build options, its scalar arguments, its
workspaces and its rules on the sizes are expressions of the same names; an operand may
be stored column-major (``storage``); a struct parameter is packed field by field
(``Record``); a template is launched by its instance's name (``mm<float>``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from xbackend.errors import UnsupportedParameter
from xbackend.families import expressions
from xbackend.families.variant import BUFFERS, Launch, broken_rule
from xbackend.launches.choices import Candidate, ParameterChoice, TileChoice, is_count
from xbackend.launches.geometry import Geometry, Planner
from xbackend.launches.kernels import (
    C_TYPES,
    STAMP_PARAMETERS,
    index_parameters,
    kinds,
    long_parameters,
    parameters,
    struct_fields,
    struct_packing,
)
from xbackend.launches.launch import Arg, Buffer, KernelLaunch, Product, Record
from xbackend.launches.operands import INDEX_MAX, format_bytes
from xbackend.launches.plans import Layout, index_options, tiled_reach
from xbackend.launches.specs import DeviceInfo, VariantSpec
from xbackend.operations import Operation, Shape, operation

Array = np.ndarray[Any, Any]
_FLOATS: dict[str, type[np.floating[Any]]] = {"float32": np.float32, "float64": np.float64}


class Element(Geometry):
    """Launches as the manifest writes them (the module's docstring)."""

    def plan(
        self, backend: Planner, op: str, spec: VariantSpec, tile: int | None,
        A: Array, B: Array, params: Mapping[str, int] | None, wide: bool,
    ) -> Product:  # fmt: skip
        if params is None and spec.configurable:  # as ``xbackend tune`` chose, if it did
            params = backend.chosen_parameters(spec, op, tile, A.dtype)
        return plan_element(op, spec, A, B, tile, params, wide, backend.device)

    def problem(
        self, device: DeviceInfo, spec: VariantSpec, tile: int | None, itemsize: int,
        words: tuple[str, str], params: Mapping[str, int] | None,
    ) -> str | None:  # fmt: skip
        return group_problem(device, spec, tile, itemsize, words, params)

    def space(
        self, backend: Planner, spec: VariantSpec, shape: Shape, itemsize: int, op: str
    ) -> list[Candidate]:
        """Its tiles, or each combination of its family's parameters, that the device
        runs."""
        if not spec.configurable:
            return [TileChoice(tile) for tile in backend.tiles(spec.name, op, itemsize)]
        return [
            ParameterChoice(tuple(config.items()))
            for config in spec.space()
            if not backend.tile_problem(spec.name, config.get("TILE"), itemsize, op, config)
        ]

    def candidate(self, params: Mapping[str, int]) -> Candidate:
        if set(params) == {"TILE"}:
            return TileChoice(int(params["TILE"]))
        return ParameterChoice(tuple((name, int(value)) for name, value in params.items()))

    def entry_problem(self, params: Mapping[str, Any]) -> str | None:
        for name, value in params.items():  # the variant's manifest checks them at lookup
            if not is_count(value) or value == 0:
                return f"{str(name)[:40]} must be a count, not {str(value)[:40]!r}"
        return None


def group_problem(
    device: DeviceInfo,
    spec: VariantSpec,
    tile: int | None,
    itemsize: int,
    words: tuple[str, str],
    params: Mapping[str, int] | None = None,
) -> str | None:
    """Why a group of ``spec`` at ``tile`` with ``params`` cannot run on ``device``: the
    patch, the family's rules of a configuration, the workers, the staged memory. The
    kernels' own rules (how a tile splits into patches, how the slab loads share out) are
    checked here, before any compiler sees the options."""
    workers, memory = words
    where = f"tile {tile}" if tile is not None else "its parameters"
    try:
        rows, columns = spec.per_thread(tile, params)
        names = spec.names_at(tile, params)
    except expressions.ExpressionError as error:
        return f"{where}: {error}"
    if not spec.group and (rows < 1 or columns < 1 or (tile or 0) % rows or (tile or 0) % columns):
        return f"tile {tile} does not split into {rows}×{columns} patches per {workers[:-1]}"
    broken = broken_rule(spec.configuration_rules, names, where)  # the family's own rules
    if broken:
        return broken
    threads = names["THREADS"]
    limit = device.max_work_group_size or 0
    for axis, size in zip("xyz", spec.group, strict=False):  # two negatives make a group
        if (count := expressions.evaluate(size, names)) < 1:
            return (
                f"{where}: group {axis} = {size!r} is {count} {workers}: a group has at least "
                f"one ({_manifest(spec)})"
            )
    if threads < 1:
        return f"{where}: a group of {threads} {workers}"
    if threads > limit:
        return f"{threads} {workers} exceed the limit of {limit} per group"
    local = device.local_mem_bytes or 0
    try:
        staged = expressions.evaluate(spec.staged, names)  # elements one group stages
    except expressions.ExpressionError as error:
        return f"{where}: staged: {error} ({_manifest(spec)})"
    if staged * itemsize > local:
        return (
            f"the tiles of {staged} {itemsize}-byte elements exceed "
            f"{local} bytes of {memory} memory"
        )
    return None


def build_options(
    names: Mapping[str, int], dtype: np.dtype[Any], spec: VariantSpec
) -> tuple[str, ...]:
    """The -D options of a variant, as its family's manifest writes them (``build``:
    expressions of ``names``, ``REAL`` the element type), and its switches."""
    options = []
    for name, value in spec.build:
        given = (
            C_TYPES[dtype.name] if value == "REAL" else _valued(spec, f"build.{name}", value, names)
        )
        options.append(f"-D{name}={given}")
    return (*options, *(f"-D{name}" for name in spec.defines))


def shape_problem(spec: VariantSpec, names: Mapping[str, int]) -> str | None:
    """Why a kernel does not take a product of these sizes: a rule of its manifest on
    the sizes that does not hold (``K % TS == 0``), or None."""
    return broken_rule(spec.size_rules, names)


def size_names(
    M: int, N: int, K: int, batch: int = 1, output: tuple[int, int] | None = None
) -> dict[str, int]:
    """The names of a product's sizes (``SIZES``) an expression may use: A is M×K, B is
    K×N, ``batch`` products, C ``output`` (rows, columns; M×N where not given)."""
    rows, columns = output or (M, N)
    return {"M": M, "N": N, "K": K, "BATCH": batch, "ROWS": rows, "COLUMNS": columns}


def fitted(spec: VariantSpec, M: int, N: int, K: int) -> tuple[int, int, int] | None:
    """The product nearest M×K · K×N whose sizes the kernel's rules take (``requires``
    that name a size): itself; else square at one of its sizes; else with its sizes
    rounded up to a multiple of 2, 4, ..., 256 (``K % TS == 0``), square or not. None
    where none of these is taken. ``check`` runs a kernel at the shapes it takes."""
    if not spec.size_rules:
        return M, N, K
    names = spec.names_at(spec.default_tile, None)
    candidates = [(M, N, K), *((s, s, s) for s in (M, N, K))]
    for step in (2, 4, 8, 16, 32, 64, 128, 256):
        up = [-(-size // step) * step for size in (M, N, K)]
        candidates += [(up[0], up[1], up[2]), *((s, s, s) for s in up)]
    for m, n, k in candidates:
        if shape_problem(spec, {**names, **size_names(m, n, k)}) is None:
            return m, n, k
    return None


def plan_element(
    op: str | Operation,
    spec: VariantSpec,
    A_: Array,
    B_: Array,
    tile: int | None,
    params: Mapping[str, int] | None = None,
    wide: bool = False,
    device: DeviceInfo | None = None,
) -> Product:
    """The launches of one product of an "element" variant at ``tile`` with ``params``
    (its parameters' defaults where not given), its arguments bound as its manifest says;
    64-bit offsets where the product needs them, or ``wide`` asks for them. A product
    whose sizes break one of the kernel's rules, or at which a size of its manifest has
    no usable value (a grid of no group, a workspace larger than ``device`` holds), is an
    ``UnsupportedParameter`` naming the key, its value and the manifest."""
    op = operation(op)
    taken = {str(launch.takes(p)) for launch in spec.launches for p in _declared(spec, launch)}
    taken |= {str(value) for value in spec.arguments.values()}
    if "lda" not in taken or spec.storage:  # a kernel without leading dimensions reads compact rows
        A_ = np.ascontiguousarray(A_)
    if "ldb" not in taken or spec.storage:
        B_ = np.ascontiguousarray(B_)
    layout = _stored(Layout.of(op, A_, B_), spec.storage)
    rows, columns = layout.output
    s = layout.sizes  # and the leading dimensions, the strides
    sized = {**s, **size_names(s["M"], s["N"], s["K"], layout.batch, layout.output)}
    names = {**spec.names_at(tile, params), **sized}
    problem = shape_problem(spec, names)
    if problem:
        raise UnsupportedParameter(f"{spec.name} does not take {_shape(layout)}: {problem}")
    reach = _reach(spec, layout, tile or 1, op.reduced)
    _check_reach(spec, reach)
    options = (*build_options(names, A_.dtype, spec), *index_options(reach, wide))
    given: dict[str, Arg] = {name: Buffer(name) for name in BUFFERS}
    given |= {name: Buffer(name) for name, _ in spec.workspaces}
    given |= sized
    steps = tuple(
        _launch(spec, launch, names, given, options, A_.dtype) for launch in spec.launches
    )
    workspaces = {
        name: _workspace(spec, name, size, names, A_.itemsize, device)
        for name, size in spec.workspaces
    }
    shape = (*([layout.batch] if op.batched else []), rows, columns)
    turned = spec.storage.get("C") == "column-major"
    stored = (*shape[:-2], columns, rows) if turned else shape
    config = spec.configuration(tile, params) if spec.configurable else None
    return Product(
        layout.inputs, stored, A_.dtype, steps, workspaces, tile=tile, params=config,
        output_turned=turned,
    )  # fmt: skip


def _declared(spec: VariantSpec, launch: Launch) -> list[str]:
    return [p for p in parameters(spec.family, launch.kernel) if p not in STAMP_PARAMETERS]


def _shape(layout: Layout) -> str:
    s = layout.sizes
    batch = f"{layout.batch}× " if layout.batch > 1 else ""
    return f"{batch}{s['M']}×{s['K']} · {s['K']}×{s['N']}"


def _stored(layout: Layout, storage: Mapping[str, str]) -> Layout:
    """``layout`` with each operand ``storage`` names column-major stored so: transposed,
    its leading dimension its rows (A's M, B's K, C's ROWS)."""
    if not storage:
        return layout
    sizes = dict(layout.sizes)
    inputs = {}
    for name, X, shape, rows in (
        ("A", layout.A, (sizes["M"], sizes["K"]), "M"),
        ("B", layout.B, (sizes["K"], sizes["N"]), "K"),
    ):
        if storage.get(name) == "column-major":
            matrices = X.reshape(layout.batch, *shape)
            X = np.ascontiguousarray(np.swapaxes(matrices, -1, -2)).reshape(-1)
            sizes[f"ld{name.lower()}"] = sizes[rows]
        inputs[name] = X
    if storage.get("C") == "column-major":
        sizes["ldc"] = layout.output[0]
    return dataclasses.replace(layout, A=inputs["A"], B=inputs["B"], sizes=sizes)


def _reach(spec: VariantSpec, layout: Layout, tile: int, reduced: bool) -> int:
    """The farthest element offset the kernels form: as the fixed-tile kernels do, or,
    for operands stored otherwise and workspaces, the last element of every buffer."""
    reach = tiled_reach(layout, tile, reduced)
    if spec.storage:
        rows, columns = layout.output
        reach = max(reach, layout.A.size - 1, layout.B.size - 1, layout.batch * rows * columns - 1)
    return reach


def _check_reach(spec: VariantSpec, reach: int) -> None:
    if reach <= INDEX_MAX or index_parameters(spec.family, spec.kernel):
        return
    for launch in spec.launches:
        declared = _declared(spec, launch)
        sizes = [p for p in declared if launch.takes(p) not in BUFFERS]
        long = long_parameters(spec.family, launch.kernel)
        if not sizes or not set(sizes) <= long:
            raise UnsupportedParameter(
                f"{launch.function} takes 32-bit offsets, and this product reaches offset "
                f"{reach} (past 2^31 - 1): declare its sizes 64-bit (size_t), or INDEX (see "
                "kernels/mm/mm.cl), to run it"
            )


def _launch(
    spec: VariantSpec,
    launch: Launch,
    names: Mapping[str, int],
    given: Mapping[str, Arg],
    options: tuple[str, ...],
    dtype: np.dtype[Any],
) -> KernelLaunch:
    """One launch bound: its geometry, and each parameter's value as its type takes it."""
    grid, block, dims = _geometry(spec, launch, names)
    kernel = _instance(launch.kernel, dtype)
    passed = kinds(spec.family, kernel)
    args: dict[str, Arg] = {}
    for param in _declared(spec, launch):
        if passed[param] == "struct":
            fields = struct_fields(spec.family, kernel, param)
            args[param] = Record(tuple(
                (field, kind, _value(spec, f"{param}.{field}", kind, names, given, dtype, launch))
                for field, kind in fields
            ), struct_packing(spec.family, kernel, param))  # fmt: skip
        else:
            args[param] = _value(spec, param, passed[param], names, given, dtype, launch)
    return KernelLaunch.bound(kernel, spec.family, options, grid, block, args, dims)


def _instance(kernel: str, dtype: np.dtype[Any]) -> str:
    """A template's instance for ``dtype``: ``mm<REAL>`` is ``mm<float>`` in float32."""
    return kernel.replace("REAL", C_TYPES[dtype.name]) if "<" in kernel else kernel


def _value(
    spec: VariantSpec, param: str, kind: str, names: Mapping[str, int], given: Mapping[str, Arg],
    dtype: np.dtype[Any], launch: Launch,
) -> Any:  # fmt: skip
    """What a parameter of ``kind`` takes: a buffer or size by name, an expression's
    value, a number; a float of the parameter's type."""
    takes: Any = launch.takes(param)
    if isinstance(takes, str) and takes in given:
        takes = given[takes]
    elif isinstance(takes, str):
        before = "" if launch == spec.launch else f"before {launch.function}: "
        takes = _valued(spec, f"{before}arguments.{param}", takes, names)
    if kind in _FLOATS:
        return _FLOATS[kind](takes)
    if kind == "real":  # the element type: a float or a double (an int in int32)
        return dtype.type(takes)
    return takes


def _geometry(
    spec: VariantSpec, launch: Launch, names: Mapping[str, int]
) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    """A launch's groups along x, y, z, its workers per group, and the axes an OpenCL
    launch names: as the manifest writes them (an axis not written: 1 worker, 1 group,
    but z of a two-axis grid: a group per product of the batch), or the default."""
    batch = names["BATCH"]
    if launch.group:
        key = "" if launch == spec.launch else f"before {launch.function}: "
        block = _counts(spec, f"{key}group", launch.group, names)
        grid = _counts(spec, f"{key}grid", launch.grid, names)
        dims = len(block)
        if dims == 2 and batch > 1:
            block, grid, dims = [*block, 1], [*grid, batch], 3
        block += [1] * (3 - len(block))
        grid += [1] * (3 - len(grid))
        return (grid[0], grid[1], grid[2]), (block[0], block[1], block[2]), dims
    tile, tm, tn = names["TILE"], names["TM"], names["TN"]
    rows, columns = names["ROWS"], names["COLUMNS"]
    grid3 = (-(-columns // tile), -(-rows // tile), batch)
    block3 = (tile // tn, tile // tm, 1)
    if spec.x == "rows":  # the launch's x axis runs down the rows of C
        grid3, block3 = (grid3[1], grid3[0], grid3[2]), (block3[1], block3[0], 1)
    return grid3, block3, 3


# The most groups, or workers of a group, a launch takes along an axis: CUDA's grid takes
# 2^31 - 1 along x (65,535 along y and z, which its driver names); past it no runtime
# launches, and a value past 2^64 reached OpenCL's binding as a bad cast.
MAX_COUNT = 2**31 - 1


def _manifest(spec: VariantSpec) -> str:
    """The manifest that declared ``spec``, as a message names it."""
    shipped = spec.source.startswith("shipped:")
    return f"kernels/{spec.family}/family.toml" if shipped else spec.source or "its manifest"


def _at(value: str | int, names: Mapping[str, int]) -> str:
    """The values an expression read (``M = 7, N = 13``), or "" for a number."""
    if isinstance(value, int):
        return ""
    used = sorted(expressions.names(value) & set(names))
    return f" at {', '.join(f'{n} = {names[n]}' for n in used)}" if used else ""


def _valued(spec: VariantSpec, key: str, value: str | int, names: Mapping[str, int]) -> int:
    """The value of a size of ``spec``'s manifest (``key``: ``grid x``, ``arguments.n``),
    or an ``UnsupportedParameter`` naming the key, its value and the manifest where it
    has none (a division by zero, an uneven one)."""
    try:
        return int(expressions.evaluate(value, names))
    except expressions.ExpressionError as error:
        raise UnsupportedParameter(
            f"{_manifest(spec)}: variant '{spec.name}': {key}: {error}{_at(value, names)}"
        ) from None


def _counts(
    spec: VariantSpec, key: str, sizes: tuple[str | int, ...], names: Mapping[str, int]
) -> list[int]:
    """A launch's groups (``grid``) or workers per group (``group``) along each axis: each
    from 1 to ``MAX_COUNT``, or an ``UnsupportedParameter`` saying which is not."""
    found = []
    for axis, size in zip("xyz", sizes, strict=False):
        value = _valued(spec, f"{key} {axis}", size, names)
        if not 1 <= value <= MAX_COUNT:
            raise UnsupportedParameter(
                f"{_manifest(spec)}: variant '{spec.name}': {key} {axis} = {size!r} is "
                f"{value}{_at(size, names)}: a launch takes 1 to 2^31 - 1 along an axis"
            )
        found.append(value)
    return found


def _workspace(
    spec: VariantSpec, name: str, size: str | int, names: Mapping[str, int], itemsize: int,
    device: DeviceInfo | None,
) -> int:  # fmt: skip
    """A workspace's bytes: at least one element, and no more than ``device`` holds."""
    key = f"workspaces.{name}"
    elements = _valued(spec, key, size, names)
    nbytes = elements * itemsize
    where = f"{_manifest(spec)}: variant '{spec.name}': {key} = {size!r} is {elements} elements"
    if elements < 1:
        raise UnsupportedParameter(f"{where}{_at(size, names)}: a workspace holds at least one")
    limit = device and (device.max_alloc_bytes or device.global_mem_bytes)
    if nbytes > (limit or 2**63 - 1):
        holds = f"the device's {format_bytes(limit)}" if limit else "any device"
        raise UnsupportedParameter(
            f"{where} ({format_bytes(nbytes)}){_at(size, names)}: more than {holds} in one buffer"
        )
    return nbytes
