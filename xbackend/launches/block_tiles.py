"""The block-tiles geometry (kernels/mm_warp): a product's configuration chosen (the call's
parameters, else the tune cache's or the shipped database's choice, else the default the
device's registers give), checked against the device, and planned as launches: mm_warp,
and the sum of the slices where K is split.

The one module of the backends that knows ``warp.WarpConfig``: the others hand it
parameters as names and ints, as the records keep them (tests/test_structure.py).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

import numpy as np

from xbackend.errors import UnsupportedParameter
from xbackend.families.variant import broken_rule
from xbackend.launches import warp
from xbackend.launches.choices import Candidate, Timer, Trial, shape_class
from xbackend.launches.geometry import Geometry, Planner
from xbackend.launches.kernels import C_TYPES, SUM_BLOCK
from xbackend.launches.launch import Buffer, KernelLaunch, Product
from xbackend.launches.plans import C, Layout, _blocks, _last, index_options
from xbackend.launches.specs import DeviceInfo, VariantSpec
from xbackend.operations import Operation, Shape, operation

Array = np.ndarray[Any, Any]
A, B = Buffer("A"), Buffer("B")
Key = TypeVar("Key")
SPLITS = (1, 2, 3, 4, 6)  # K ranges tried where the output is small
COARSE_KEEP = 2  # block tiles whose every configuration the second stage times


class BlockTiles(Geometry):
    """kernels/mm_warp's block tiles: a configuration chosen per product (the module's
    docstring), a space of block tiles with K splits, searched coarse to fine."""

    per_product: ClassVar[bool] = True

    def plan(
        self, backend: Planner, op: str, spec: VariantSpec, tile: int | None,
        A: Array, B: Array, params: Mapping[str, int] | None, wide: bool,
    ) -> Product:  # fmt: skip
        return plan(backend, op, spec, tile, A, B, params, wide)

    def problem(
        self, device: DeviceInfo, spec: VariantSpec, tile: int | None, itemsize: int,
        words: tuple[str, str], params: Mapping[str, int] | None,
    ) -> str | None:  # fmt: skip
        if tile is None and params is None:
            return "block tiles need a tile or a configuration"
        return group_problem(device, spec, tile or 0, itemsize, *words, params)

    def space(
        self, backend: Planner, spec: VariantSpec, shape: Shape, itemsize: int, op: str
    ) -> list[Candidate]:
        """Every configuration of its manifest's space (``candidates``) the device runs,
        with K splits where the output is too small to fill the device (22 to 26
        configurations for a large output, 110 to 130 for a small one)."""
        units = backend.device.compute_units or 0
        small = shape_class(*operation(op).output_size(shape), units) == "small"
        configs: list[Candidate] = []
        for config in candidates(spec):
            if backend.tile_problem(spec.name, config.BM, itemsize, op, config.to_dict()):
                continue
            for slices in SPLITS if small else (1,):
                if slices == 1 or shape.K // slices >= warp.MIN_K_SLICE:
                    configs.append(config.with_slices(slices))
        return configs

    def candidate(self, params: Mapping[str, int]) -> Candidate:
        return warp.WarpConfig.from_dict(params)

    def search(self, space: Sequence[Candidate], time: Timer) -> list[Trial]:
        """Coarse to fine (tune_search's docstring): one configuration per block tile,
        then every other of the best COARSE_KEEP, each at every K split of the space."""
        splits: dict[warp.WarpConfig, list[int]] = {}
        for config in space:
            assert isinstance(config, warp.WarpConfig)
            splits.setdefault(config.with_slices(1), []).append(config.slices)
        tiles: dict[tuple[int, int], list[warp.WarpConfig]] = {}
        for config in splits:
            tiles.setdefault((config.BM, config.BN), []).append(config)
        trials: list[Trial] = []

        def run(batch: list[warp.WarpConfig]) -> None:
            """Time each configuration of ``batch`` not yet timed, at every K split: a
            split is an argument of the launch, so it costs no build of its own."""
            timed: set[Candidate] = {trial.config for trial in trials}
            fresh = [c.with_slices(s) for c in dict.fromkeys(batch) for s in splits[c]]
            trials.extend(time([config for config in fresh if config not in timed]))

        # 1. coarse: one per block tile, its largest patch at the shallowest slab.
        run([min(group, key=_coarse_rank) for group in tiles.values()])
        # 2. fine: the rest of the best block tiles.
        run([config for tile in _best(trials, _block_tile, COARSE_KEEP) for config in tiles[tile]])
        return trials

    def claims(self, params: Mapping[str, Any]) -> bool:
        return "BM" in params

    def entry_problem(self, params: Mapping[str, Any]) -> str | None:
        try:
            config = warp.WarpConfig.from_dict(params)
        except (TypeError, ValueError) as error:
            return str(error)
        if config.slices > warp.MAX_SLICES:
            return f"{config.slices} K ranges; at most {warp.MAX_SLICES}"
        return config.problem()


def candidates(spec: VariantSpec) -> Iterator[warp.WarpConfig]:
    """The configurations of a block-tiles variant's space, before the K splits: each
    combination of its manifest's ``parameters`` (BM, BN, BK, TM, TN; STAGES for an
    asynchronous one) that its rules (``requires``) keep, with the group tiles of its
    layout, that the kernel takes (``WarpConfig.problem``) with 64 to 256 threads."""
    names = [name for name, _ in spec.parameters]
    for values in itertools.product(*(values for _, values in spec.parameters)):
        chosen = dict(zip(names, values, strict=True))
        if broken_rule(spec.configuration_rules, {**spec.constants, **chosen}):
            continue
        bm, bn, bk, tm, tn = (chosen[name] for name in ("BM", "BN", "BK", "TM", "TN"))
        for wm, wn in warp.group_tiles(spec.layout, bm, bn, tm, tn):
            config = warp.WarpConfig(bm, bn, bk, wm, wn, tm, tn, stages=chosen.get("STAGES", 0))
            if config.problem() is None and 64 <= config.threads <= 256:
                yield config


def _block_tile(trial: Trial) -> tuple[int, int]:
    """The block tile (BM, BN) of a trial of the coarse search."""
    config = trial.config
    assert isinstance(config, warp.WarpConfig)
    return config.BM, config.BN


def _coarse_rank(config: warp.WarpConfig) -> tuple[int, int, int, int]:
    """The first stage's pick of a block tile: the most outputs per thread (the most
    reuse of each value read from the slabs), then the shallowest slab, then the
    taller patch; of an asynchronous variant's, the default stage count."""
    stages = abs(config.stages - warp.DEFAULT_STAGES) if config.stages else 0
    return -(config.TM * config.TN), config.BK, -config.TM, stages


def _best(trials: list[Trial], key: Callable[[Trial], Key], count: int) -> list[Key]:
    """The ``count`` best distinct keys of the timed trials, best first (``Trial.score``:
    the fastest, or in an energy tune the fewest joules)."""
    chosen: list[Key] = []
    for trial in sorted((t for t in trials if t.tflops), key=lambda t: t.score, reverse=True):
        if key(trial) not in chosen:
            chosen.append(key(trial))
        if len(chosen) == count:
            break
    return chosen


def plan(
    backend: Planner,
    op: str,
    spec: VariantSpec,
    tile: int | None,
    A_: Array,
    B_: Array,
    params: Mapping[str, int] | None,
    wide: bool,
) -> Product:
    """The launches of one product of a block-tiles variant on ``backend``'s device."""
    config = configure(backend, operation(op), spec, tile, A_, B_, params)
    config = staged(spec, config, A_.itemsize, backend.device.local_mem_bytes)
    problem = config.problem() or backend.tile_problem(
        spec.name, config.BM, A_.itemsize, op, config.to_dict()
    )
    if problem:
        raise UnsupportedParameter(f"{backend.name} {spec.name}: {problem}")
    pad, staged_bytes = _slabs(backend.device, spec, config, A_.itemsize)
    dynamic = staged_bytes if staged_bytes > (backend.device.local_mem_bytes or 0) else 0
    return plan_warp(op, spec, config, A_, B_, wide, dynamic, pad)


def _block_memory(device: DeviceInfo) -> int:
    """The shared/local memory a block may have: what it may declare, or more where the
    device lets it ask for more at launch (CUDA's opt-in)."""
    return device.local_mem_opt_in_bytes or device.local_mem_bytes or 0


def _slabs(
    device: DeviceInfo, spec: VariantSpec, config: warp.WarpConfig, itemsize: int
) -> tuple[int, int]:
    """A block's slabs on ``device``: the padding of A's rows (``WarpConfig.padding``)
    and the bytes they take with it."""
    pad = config.padding(itemsize, spec.double_buffered, _block_memory(device))
    return pad, config.staged_bytes(itemsize, spec.double_buffered, pad)


def group_problem(
    device: DeviceInfo,
    spec: VariantSpec,
    tile: int,
    itemsize: int,
    workers: str,
    memory: str,
    params: Mapping[str, int] | None = None,
) -> str | None:
    """Why a group of ``spec`` in the configuration ``params`` (None: its default at
    ``tile``) cannot run on ``device``."""
    if params is None:
        config = warp.default_config(
            spec.layout, tile, device.registers, double_buffered=spec.double_buffered
        )
    else:
        try:
            config = warp.WarpConfig.from_dict(params)
        except (TypeError, ValueError) as error:
            return str(error)
    config = staged(spec, config, itemsize, device.local_mem_bytes)
    return _warp_problem(device, spec, config, itemsize, workers, memory)


def staged(
    spec: VariantSpec, config: warp.WarpConfig, itemsize: int, memory: int | None
) -> warp.WarpConfig:
    """``config`` with a stage count where ``spec`` is asynchronous and the configuration
    names none (an untuned default): DEFAULT_STAGES, or fewer where their slabs would
    not fit the ``memory`` bytes of shared/local memory (8-byte elements: 2 stages of a
    128×128×8 block), at least MIN_STAGES."""
    if not spec.asynchronous or config.stages:
        return config
    for stages in range(warp.DEFAULT_STAGES, warp.MIN_STAGES, -1):
        if config.with_stages(stages).staged_bytes(itemsize, False) <= (memory or 0):
            return config.with_stages(stages)
    return config.with_stages(warp.MIN_STAGES)


def stages_problem(spec: VariantSpec, config: warp.WarpConfig) -> str | None:
    """Why ``config`` does not fit ``spec``: stages given to a variant without ASYNC."""
    if config.stages and not spec.asynchronous:
        return f"{spec.name} copies no slabs asynchronously: it takes no stages"
    return None


def configure(
    backend: Planner,
    op: Operation,
    spec: VariantSpec,
    tile: int | None,
    A: Array,
    B: Array,
    params: Mapping[str, int] | None,
) -> warp.WarpConfig:
    """Explicit parameters, else the tuned ones, else the size-aware default."""
    if params is not None:
        try:
            return warp.WarpConfig.from_dict(
                {**_default_config(backend, spec, 128).to_dict(), **params}
            )
        except ValueError as error:
            raise UnsupportedParameter(str(error)) from error
    M, N = op.output_shape(A, B)[-2:]
    K = A.shape[-1]
    units = backend.device.compute_units or 0
    tuned = _tuned_config(backend, op, spec, A.dtype, (M, N, K))
    if tuned is not None and tile in (None, tuned.BM):
        return tuned
    registers, double = backend.device.registers, spec.double_buffered
    size = None if op.batched else (M, N, K)  # a batch is z already: no split along K
    if tile is None:
        lanes = (backend.device.vector_width or 1) if backend.device.kind == "cpu" else None
        shared = (A.itemsize, backend.device.local_mem_bytes)
        return warp.untuned_config(
            spec.layout, registers, double, size, units, lanes, spec.asynchronous, shared
        )
    config = _default_config(backend, spec, tile)
    if size is not None:
        resident = warp.resident_blocks(config, registers, double)
        config = config.with_slices(warp.auto_slices(config, *size, units, resident))
    return config


def _default_config(backend: Planner, spec: VariantSpec, tile: int) -> warp.WarpConfig:
    """A tuned variant's configuration at ``tile`` before any tuning: derived from
    this device's registers where it says them (see warp.default_config)."""
    registers, double = backend.device.registers, spec.double_buffered
    return warp.default_config(spec.layout, tile, registers, double_buffered=double)


def _tuned_config(
    backend: Planner,
    op: Operation,
    spec: VariantSpec,
    dtype: np.dtype[Any],
    size: tuple[int, int, int],
) -> warp.WarpConfig | None:
    """The choice of this backend's ``choices`` for the product, if it has one."""
    if not op.tuned_as:
        return None
    M, N, _ = size
    found = shape_class(M, N, backend.device.compute_units or 0)
    chosen = backend.choice(spec.name, op.name, dtype, found, size)
    return None if chosen is None else warp.WarpConfig.from_dict(chosen)


def warp_reach(layout: Layout, config: warp.WarpConfig, k_slice: int, strideC: int) -> int:
    """The farthest element offset kernels/mm_warp forms (with ``config.slices`` K
    ranges ``k_slice`` long, partial products ``strideC`` apart): A to a slab past its
    rows' ends and B a slab below its last row (the pointers of the unchecked loads, and
    their step BK·ldb), C to the edge tiles' last row and column (their stores'
    pointers), the sum of the slices, and K + k_slice (the number of ranges)."""
    s, (rows, columns) = layout.sizes, layout.output
    z = layout.batch * config.slices
    padded = (_blocks(rows, config.BM) * config.BM, _blocks(columns, config.BN) * config.BN)
    reach = max(
        layout.operand_reach(config.BK, config.BK),
        _last(padded[0], s["ldc"], padded[1], z, strideC),
        s["K"] + k_slice,
    )
    if config.slices > 1:  # mm_sum_slices: its threads in whole blocks, each reading W
        outputs = rows * columns
        threads = _blocks(outputs, SUM_BLOCK) * SUM_BLOCK
        reach = max(reach, config.slices * outputs - 1, threads - 1)
    return reach


def plan_warp(
    op: str | Operation,
    spec: VariantSpec,
    config: warp.WarpConfig,
    A_: Array,
    B_: Array,
    wide: bool = False,
    dynamic_shared: int = 0,
    pad: int = warp.PAD,
) -> Product:
    """kernels/mm_warp for ``op``, and the sum of the slices where K is split; 64-bit
    offsets where the product needs them, or ``wide`` asks for them; the slabs in
    ``dynamic_shared`` bytes of dynamic shared memory where that is not 0 (CUDA, past
    the 48 KB a kernel may declare); A's transposed slab rows ``pad`` longer.

    For rmm the kernel is built with -DREDUCED: M and N are then those of the
    (M/2)×(N/2) output, and the kernel sums the pairs of rows of A and of columns
    of B as it loads its slabs.
    """
    op = operation(op)
    layout = Layout.of(op, A_, B_)
    shape = op.output_shape(A_, B_)
    M, N = shape[-2:]
    K, lda, ldb = (layout.sizes[name] for name in ("K", "lda", "ldb"))
    if op.batched:  # z is the batch: no split
        config = config.with_slices(1)
        strides = tuple(layout.sizes[name] for name in ("strideA", "strideB", "strideC"))
    else:  # z is the K range of a split: strideC apart in the workspace
        strides = (0, 0, M * N)
    k_slice = warp.k_slice(config, K)
    slices = _blocks(K, k_slice)
    config = config.with_slices(slices)
    vec4 = warp.vec4_ok(A_.itemsize, lda, ldb, N, *strides, k_slice)
    options = [*warp.defines(config, A_.dtype, vec4, spec.double_buffered, pad)]
    options.append(f"-DREAL={C_TYPES[A_.dtype.name]}")
    if op.reduced:
        options.append("-DREDUCED")
    options += index_options(warp_reach(layout, config, k_slice, strides[2]), wide)
    if dynamic_shared:
        options.append("-DDYNAMIC_SHARED")
    split = slices > 1
    product = KernelLaunch.of(
        spec.kernel, spec.family, tuple(options),
        grid=(_blocks(N, config.BN), _blocks(M, config.BM), layout.batch * slices),
        block=(config.threads, 1, 1),
        A=A, B=B, C=Buffer("W") if split else C, M=M, N=N, K=K, lda=lda, ldb=ldb, ldc=N,
        **dict(zip(("strideA", "strideB", "strideC"), strides, strict=True)), k_slice=k_slice,
    )  # fmt: skip
    product = dataclasses.replace(product, shared_bytes=dynamic_shared)
    if not split:
        return Product(layout.inputs, shape, A_.dtype, (product,), tile=config.BM,
                       params=config.to_dict())  # fmt: skip
    # The partial products go to a workspace, and a second launch adds them into C.
    workspaces = {"W": M * N * slices * A_.itemsize}
    steps = (product, _sum_slices(spec.family, tuple(options), M, N, slices))
    return Product(
        layout.inputs, shape, A_.dtype, steps, workspaces, tile=config.BM, params=config.to_dict()
    )


def _sum_slices(family: str, options: tuple[str, ...], M: int, N: int, slices: int) -> KernelLaunch:
    """The launch of mm_sum_slices: C = the sum of the ``slices`` partial products in W."""
    return KernelLaunch.of(
        warp.SUM_KERNEL, family, options,
        grid=(_blocks(M * N, SUM_BLOCK), 1, 1), block=(SUM_BLOCK, 1, 1), dims=1,
        W=Buffer("W"), C=C, M=M, N=N, ldc=N, slices=slices,
    )  # fmt: skip


def _warp_problem(
    device: DeviceInfo,
    spec: VariantSpec,
    config: warp.WarpConfig,
    itemsize: int,
    workers: str,
    memory: str,
) -> str | None:
    problem = stages_problem(spec, config) or config.problem()
    if problem:
        return problem
    limit = device.max_work_group_size or 0
    if config.threads > limit:
        return f"{config.threads} {workers} exceed the limit of {limit} per group"
    available = _block_memory(device)
    _, staged = _slabs(device, spec, config, itemsize)
    if staged > available:
        return f"the slabs' {staged} bytes exceed {available} bytes of {memory} memory"
    return None
