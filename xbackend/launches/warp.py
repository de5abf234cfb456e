"""The parameters of kernels/mm_warp: defaults, limits, the tuner's search space, launches.

A configuration names the block tile (BM×BN, BK deep), the group tile (WM×WN) and the
patch per thread (TM×TN), which reach the kernel as ``-D`` options, and the number of
K ranges of a split product, which reaches it as an argument. The kernel file
explains what each one does; this module decides which ones a launch uses:

- an explicit configuration (``Backend.measure(..., params=...)``, as ``tune`` does);
- else the one ``xbackend tune`` cached for the device, variant and shape class, or
  the shipped tuning database's (``xbackend/tuning/database.py``);
- else a default derived from the device and the product (``untuned_config``): the
  patch per thread from the registers of a multiprocessor, a halved block where the
  output is small and that keeps more threads at work, and a split along K that fills
  the multiprocessors' resident slots in one wave.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

from xbackend.launches.choices import shape_class
from xbackend.launches.kernels import SUM_BLOCK

FAMILY = "mm_warp"
SUM_KERNEL = "mm_sum_slices"
TILE_NAMES = ("BM", "BN", "BK", "WM", "WN", "TM", "TN")
WARP = 32  # threads per warp, and per group of a warp-tiled configuration
WARP_ROWS, WARP_COLUMNS = 4, 8  # the threads of a warp-tiled group (see group_tiles)
PAD = 4  # the kernels' padding of the transposed A slab
A_SKEW = 8  # the asynchronous kernels' skew of A's slab, every 4 rows (A_SKEW)
# An asynchronous variant's slabs in flight (kernels/mm_warp: ASYNC): the untuned default,
# and the range the kernel takes and the tuner searches.
DEFAULT_STAGES = 3
MIN_STAGES, MAX_STAGES = 2, 4
MIN_K_SLICE = 256  # a K range shorter than this spends more on the sums than it gains
MAX_SLICES = 16


@dataclasses.dataclass(frozen=True)
class WarpConfig:
    """One configuration of the mm_warp kernel (see kernels/mm_warp/mm_warp.cu)."""

    BM: int
    BN: int
    BK: int
    WM: int
    WN: int
    TM: int
    TN: int
    slices: int = 1  # K ranges of a split product; 1: no split
    stages: int = 0  # slabs in flight of an asynchronous variant (ASYNC); 0: the others

    @property
    def group_threads(self) -> int:
        return (self.WM // self.TM) * (self.WN // self.TN)

    @property
    def threads(self) -> int:
        return (self.BM // self.WM) * (self.BN // self.WN) * self.group_threads

    @property
    def warp_tiled(self) -> bool:
        return self.group_threads == WARP

    def staged_bytes(self, itemsize: int, double_buffer: bool, pad: int = PAD) -> int:
        """Shared/local memory of one block: the two slabs, twice when double-buffered,
        ``stages`` times for an asynchronous variant; A's transposed rows ``pad`` longer."""
        if self.stages:  # A's slab kept as rows of BK, skewed (the kernel's A_SLAB)
            a_slab = self.BM * self.BK + self.BM // 4 * A_SKEW
            return self.stages * (a_slab + self.BK * self.BN) * itemsize
        stages = 2 if double_buffer else 1
        return stages * self.BK * (self.BM + pad + self.BN) * itemsize

    def padding(self, itemsize: int, double_buffer: bool, memory: int | None) -> int:
        """The padding of A's transposed slab rows: PAD, or none where the padding alone
        would take the slabs past the ``memory`` bytes a block may have. NVIDIA's OpenCL
        has 49,152 bytes and nothing past them: a double-buffered 128×256×16 block takes
        49,664 padded and 49,152 without (the stores of the transposed slab then meet
        in the same banks more often; the multiply's 16-byte reads are as before)."""
        if self.stages or memory is None or self.staged_bytes(itemsize, double_buffer) <= memory:
            return PAD
        return 0 if self.staged_bytes(itemsize, double_buffer, 0) <= memory else PAD

    def problem(self) -> str | None:
        """Why the kernel cannot be built with this configuration, or None."""
        if min(dataclasses.astuple(self)[:-1]) < 1:  # all but stages, the last: 0 allowed
            return f"every parameter must be positive: {self.label}"
        if self.stages and not MIN_STAGES <= self.stages <= MAX_STAGES:
            return f"stages must be {MIN_STAGES} to {MAX_STAGES}: {self.label}"
        if self.TM % 4 or self.TN % 4 or self.BK % 4:
            return f"TM, TN and BK must be multiples of 4: {self.label}"
        if self.WM % self.TM or self.WN % self.TN or self.BM % self.WM or self.BN % self.WN:
            return f"the patches must tile the groups, and the groups the block: {self.label}"
        if (self.BM * self.BK // 4) % self.threads or (self.BK * self.BN // 4) % self.threads:
            return (
                f"{self.threads} threads cannot share the slabs' 4-element pieces evenly: "
                f"{self.label}"
            )
        if self.stages and self.threads % self.BK:  # the kernel's A_STEP
            return f"an asynchronous block's threads must be a multiple of BK: {self.label}"
        return None

    @property
    def label(self) -> str:
        split = f" K/{self.slices}" if self.slices > 1 else ""
        stages = f" {self.stages} stages" if self.stages else ""
        return (
            f"{self.BM}×{self.BN}×{self.BK} groups {self.WM}×{self.WN} "
            f"patches {self.TM}×{self.TN}{split}{stages}"
        )

    def to_dict(self) -> dict[str, int]:
        """The parameters by name; ``stages`` only where it is set (an asynchronous
        variant's), so that the other variants' records and entries read as before."""
        values = dataclasses.asdict(self)
        if not self.stages:
            del values["stages"]
        return values

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> WarpConfig:
        """A configuration from its parameters, each a Python or NumPy integer (never a
        float, a string or a bool: 16.5 must not become 16, nor True 1)."""
        names = [field.name for field in dataclasses.fields(cls)]
        unknown = set(values) - set(names)
        if unknown:
            raise ValueError(f"unknown mm_warp parameters {sorted(unknown)}; known: {names}")
        for name in names:
            value = values.get(name, 0)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise ValueError(f"mm_warp parameter {name} must be an integer, not {value!r}")
        return cls(**{name: int(values[name]) for name in names if name in values})

    def blocks(self, M: int, N: int) -> int:
        """The groups of its launch over an M×N output: block tiles times K ranges."""
        return output_tiles(self, M, N) * self.slices

    def refitted(self, blocks: int, M: int, N: int, K: int) -> WarpConfig:
        """Its K split refitted to an M×N×K product (``refit_slices``)."""
        return refit_slices(self, blocks, M, N, K)

    def with_slices(self, slices: int) -> WarpConfig:
        return dataclasses.replace(self, slices=slices)

    def with_stages(self, stages: int) -> WarpConfig:
        return dataclasses.replace(self, stages=stages)


# The registers a thread of a configuration needs, estimated as the patch (TM × TN
# sums), its two fragments (TM + TN values), two registers per 4-byte element of the slab
# loads in flight, and a base; double buffering holds the next slabs' loads besides.
# Fitted to ptxas's counts (nvcc 13.0, sm_90) of every candidate of the search, single
# and double-buffered: within 12 registers for 81 of the 104, at most 23 off; an
# asynchronous one holds 3·TM more, its A fragments of 4 steps (with BK 16 ptxas gives
# it more still: 237 for 64×128×16 with 8×8 patches, estimated 192, the same 2 blocks of
# 128 threads on a multiprocessor; a test
# compiles a few with nvcc where it is installed: tests/test_warp_defaults.py).
BASE_REGISTERS = 40
DOUBLE_BUFFER_REGISTERS = 16
THREAD_REGISTERS = 255  # the most one thread may hold (NVIDIA; AMD's is 256)
# The patches a default may take, most outputs per thread first. A thread reads TM + TN
# values of the shared slabs per step of k and does TM × TN multiply-adds with them:
# 16×8 does 5.3 per value read, 8×8 does 4.0, which is no more than an NVIDIA
# multiprocessor's ratio of multiply-adds (128 per clock) to 4-byte shared reads (32).
PATCHES = ((16, 8), (8, 8), (8, 4))
BLOCKS_PER_UNIT = 2  # blocks a default keeps resident on a multiprocessor, at least


def slab_loads(config: WarpConfig) -> int:
    """The 16-byte pieces of the two slabs each thread loads per slab."""
    return (config.BM * config.BK + config.BK * config.BN) // 4 // config.threads


def thread_registers(config: WarpConfig, double_buffered: bool = False) -> int:
    """The registers a thread of ``config`` needs, estimated (see BASE_REGISTERS)."""
    need = config.TM * config.TN + config.TM + config.TN + 8 * slab_loads(config)
    if config.stages:  # the A fragments of 4 steps at once (kernels/mm_warp: read_a4)
        need += 3 * config.TM
    return need + BASE_REGISTERS + (DOUBLE_BUFFER_REGISTERS if double_buffered else 0)


def resident_blocks(config: WarpConfig, registers: int | None, double_buffered: bool) -> int:
    """The blocks of ``config`` a multiprocessor of ``registers`` holds at once, as far as
    its registers allow (allocated per thread in eights); BLOCKS_PER_UNIT where the
    device does not say its registers."""
    if not registers:
        return BLOCKS_PER_UNIT
    per_thread = min(THREAD_REGISTERS, -(-thread_registers(config, double_buffered) // 8) * 8)
    return max(1, registers // (config.threads * per_thread))


def _block(layout: str, bm: int, bn: int, bk: int, patch: tuple[int, int]) -> WarpConfig:
    """A bm×bn×bk block of ``patch``es: one group ("block"), or groups of one warp each,
    4×8 threads (see ``group_tiles``; a block they do not tile is what ``problem`` and
    the device's checks then refuse, by name)."""
    tm, tn = patch
    if layout == "block":
        return WarpConfig(bm, bn, bk, bm, bn, tm, tn)
    return WarpConfig(bm, bn, bk, WARP_ROWS * tm, WARP_COLUMNS * tn, tm, tn)


def default_patch(
    layout: str, bm: int, bn: int, bk: int, registers: int | None, double_buffered: bool = False
) -> tuple[int, int] | None:
    """The patch per thread of a bm×bn×bk block, derived from a multiprocessor's
    ``registers`` (32-bit; None where the device does not say): the largest of PATCHES
    whose thread fits THREAD_REGISTERS, whose block keeps at least two warps, and of
    whose blocks BLOCKS_PER_UNIT fit the register file together; on a register file too
    small for that, the largest of which one block fits. None: no such patch, or the
    registers are not known."""
    if not registers:
        return None
    for blocks in (BLOCKS_PER_UNIT, 1):
        for tm, tn in PATCHES:
            if bm % tm or bn % tn or (bm // tm) * (bn // tn) < 2 * WARP:
                continue
            if layout == "warp" and not group_tiles(layout, bm, bn, tm, tn):
                continue
            config = _block(layout, bm, bn, bk, (tm, tn))
            need = thread_registers(config, double_buffered)
            fits = need <= THREAD_REGISTERS and blocks * config.threads * need <= registers
            if fits and config.problem() is None:
                return tm, tn
    return None


def default_config(
    layout: str,
    tile: int,
    registers: int | None = None,
    *,
    double_buffered: bool = False,
    small: bool = False,
) -> WarpConfig:
    """The configuration of a variant at a tile before any tuning.

    With the ``registers`` of a multiprocessor known (CUDA, NVIDIA's OpenCL), the patch
    per thread is derived from them (``default_patch``: 16×8 at 128×128 on an H100 or an
    H200, 128 threads). A ``small`` output (fewer tiles than multiprocessors: see
    ``shape_class``) halves the block's rows, so that twice the blocks share the device,
    with the patch derived again (8×8 at 64×128) and slabs twice as deep (BK 16), so
    that each thread still loads whole 16-byte pieces. Without the registers: 8×8 patches
    at 128 and 8×4 at 64, which any device takes. ``layout`` "block": the whole block is
    one group; "warp": groups of one warp each, 4×8 threads of it (see ``group_tiles``).
    """
    if registers:
        bm, bk = (tile // 2, 16) if small else (tile, 8)
        patch = default_patch(layout, bm, tile, bk, registers, double_buffered)
        if patch is not None:
            return _block(layout, bm, tile, bk, patch)
        patch = default_patch(layout, tile, tile, 8, registers, double_buffered)
        if patch is not None:
            return _block(layout, tile, tile, 8, patch)
    return _block(layout, tile, tile, 8, (8, 8) if tile >= 128 else (8, 4))


def output_tiles(config: WarpConfig, M: int, N: int, batch: int = 1) -> int:
    return math.ceil(M / config.BM) * math.ceil(N / config.BN) * batch


def auto_slices(
    config: WarpConfig, M: int, N: int, K: int, compute_units: int, resident: int = BLOCKS_PER_UNIT
) -> int:
    """K ranges for a product whose output alone would leave multiprocessors idle.

    ``resident`` blocks fit on each multiprocessor at once (``resident_blocks``); the
    split fills at most those slots in one wave, so no second, nearly empty wave follows.
    """
    tiles = output_tiles(config, M, N)
    if compute_units < 1 or tiles >= compute_units:
        return 1
    return _bounded_slices((resident * compute_units) // tiles, K)


def processor_config(layout: str, vector_width: int) -> WarpConfig:
    """The default on a processor, whose OpenCL runtime says how it vectorizes through
    its preferred vector width for floats. Width 1 (Intel's runtime): it packs a group's
    work-items into the lanes of its vector units, and small patches of a 64 tile run
    fastest (8×4: 15-24 GFLOP/s at 1024³ against 4-6 for 8×8 patches of 128, on 2 cores
    of an AMD EPYC). A wider one (PoCL's 16): it vectorizes within a work-item, and the
    16×8 patches of a 128 tile run fastest (30.4 GFLOP/s at 512³ against 14.1 for 8×8)."""
    if vector_width <= 1:
        return _block(layout, 64, 64, 8, (8, 4))
    return _block(layout, 128, 128, 8, (16, 8))


def untuned_config(
    layout: str,
    registers: int | None,
    double_buffered: bool,
    size: tuple[int, int, int] | None,
    compute_units: int,
    vector_width: int | None = None,
    asynchronous: bool = False,
    shared: tuple[int, int | None] = (4, None),
) -> WarpConfig:
    """A product's configuration without a tuned choice or a tile asked for:
    ``default_config`` at the 128 tile (on a processor, whose ``vector_width`` is given,
    ``processor_config``; for an ``asynchronous`` variant, ``asynchronous_options``),
    split along K to fill the device where its output is small (``size``: M, N and K;
    None for a batch, which fills the device along z instead).
    For a small output on a device that says its registers, the default with the
    block's rows halved competes: the one of the two that keeps the more threads at work
    in one wave (blocks in flight, at most the resident slots, times threads per block)
    is taken, the first where they tie (the larger patch: it reuses more of each value
    read). ``shared``: the element size and the device's shared memory per block (None:
    not said): a candidate whose slabs do not fit it (double-buffered, or at MIN_STAGES)
    is left out (float64 on 48 KB: the halved block, 128×256×8), 128×128×8 left where
    none fits."""
    small = size is not None and shape_class(size[0], size[1], compute_units) == "small"
    if vector_width is not None:
        options = [processor_config(layout, vector_width)]
    else:
        if asynchronous:
            options = asynchronous_options(layout, registers, small)
        else:
            full = default_config(layout, 128, registers, double_buffered=double_buffered)
            options = [full]
            if registers and small:
                halved = default_config(
                    layout, 128, registers, double_buffered=double_buffered, small=True
                )
                options.append(halved)
        itemsize, memory = shared

        def fits(config: WarpConfig) -> bool:  # at the fewest stages an asynchronous one takes
            least = config.with_stages(MIN_STAGES) if asynchronous else config
            return memory is None or least.staged_bytes(itemsize, double_buffered) <= memory

        # 128×128×8 fits every device's 48 KB in float64, double-buffered or in 2 stages.
        fallback = default_config(layout, 128, registers, double_buffered=double_buffered)
        options = [config for config in options if fits(config)] or [fallback]
    if size is None:
        return options[0]
    M, N, K = size

    def fitted(config: WarpConfig) -> tuple[int, WarpConfig]:
        # An asynchronous variant's registers counted with its default stages (read_a4).
        staged = config.with_stages(DEFAULT_STAGES) if asynchronous else config
        resident = resident_blocks(staged, registers, double_buffered)
        split = config.with_slices(auto_slices(config, M, N, K, compute_units, resident))
        blocks = output_tiles(split, M, N) * split.slices
        return min(blocks, resident * compute_units) * split.threads, split

    return max((fitted(config) for config in options), key=lambda pair: pair[0])[1]


def asynchronous_options(layout: str, registers: int | None, small: bool) -> list[WarpConfig]:
    """An asynchronous variant's untuned candidates on a device (``untuned_config``), in
    the order ties go: for a ``small`` output, 128×256×8 with 16×8 patches, the tuner's
    choice at 1000×3001·3001×1000 on an H100 and an H200 in CUDA and OpenCL (on the H100
    17% faster than the halved block's split in CUDA, 11% in OpenCL); then the halved
    block with slabs of 16 (64×128×16, 8×8 patches: the tuner's choice at 4096³ on both
    GPUs, 5% faster than 128×128×8 with 16×8 in CUDA and 11% in OpenCL; its copies hold
    no registers)."""
    candidates = []
    if registers and small:
        patch = default_patch(layout, 128, 256, 8, registers, False)
        if patch is not None:
            candidates.append(_block(layout, 128, 256, 8, patch))
    return [*candidates, default_config(layout, 128, registers, small=True)]


def refit_slices(config: WarpConfig, blocks: int, M: int, N: int, K: int) -> WarpConfig:
    """A tuned split, refitted to an M×N output with K: the K ranges that come closest
    to ``blocks``, the blocks of the tuned launch, within the limits of auto_slices."""
    return config.with_slices(_bounded_slices(round(blocks / output_tiles(config, M, N)), K))


def _bounded_slices(slices: int, K: int) -> int:
    """``slices`` K ranges, but none shorter than MIN_K_SLICE, at most MAX_SLICES, at least 1."""
    return max(1, min(slices, K // MIN_K_SLICE, MAX_SLICES))


def k_slice(config: WarpConfig, K: int) -> int:
    """The length of each K range: whole slabs, ``slices`` of them covering K."""
    if config.slices <= 1:
        return max(K, 1)
    per_range = math.ceil(K / config.slices)
    return max(config.BK, math.ceil(per_range / config.BK) * config.BK)


def group_tiles(layout: str, bm: int, bn: int, tm: int, tn: int) -> list[tuple[int, int]]:
    """The group tiles (WM, WN) of a BM×BN block with TM×TN patches: the block itself for
    the "block" layout; for "warp", exactly one warp per group: 4×8 threads, so that the
    8 threads of a quarter warp read 8 different 16-byte pieces of a B slab row."""
    if layout == "block":
        return [(bm, bn)]
    wm, wn = WARP_ROWS * tm, WARP_COLUMNS * tn
    return [(wm, wn)] if bm % wm == 0 and bn % wn == 0 else []


def vec4_ok(itemsize: int, *elements: int) -> bool:
    """Whether 16-byte loads are aligned: 4-byte elements, every row and matrix offset
    (leading dimensions, batch strides, K ranges) a multiple of 4 elements."""
    return itemsize == 4 and all(value % 4 == 0 for value in elements)


def defines(
    config: WarpConfig, dtype: np.dtype[Any], vec4: bool, double_buffer: bool, pad: int = PAD
) -> list[str]:
    """The -D options of a configuration: its tiles, the constants (A's slab rows ``pad``
    longer: ``WarpConfig.padding``), the switches (an asynchronous one's: ASYNC and its
    STAGES)."""
    options = [f"-D{name}={getattr(config, name)}" for name in TILE_NAMES]
    if config.stages:
        options += ["-DASYNC", f"-DSTAGES={config.stages}"]
    options += [f"-DPAD={pad}", f"-DSUM_BLOCK={SUM_BLOCK}"]
    if dtype.itemsize == 4:
        options.append("-DLOCAL4")
    if vec4:
        options.append("-DVEC4")
    if double_buffer:
        options.append("-DDOUBLE_BUFFER")
    return options
