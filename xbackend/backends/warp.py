"""The parameters of kernels/*/mm_warp: defaults, limits, the tuner's search space, launches.

A configuration names the block tile (BM×BN, BK deep), the group tile (WM×WN) and the
patch per thread (TM×TN), which reach the kernel as ``-D`` options, and the number of
K ranges of a split product, which reaches it as an argument. The kernel file
explains what each one does; this module decides which ones a launch uses:

- an explicit configuration (``Backend.measure(..., params=...)``, as ``tune`` does);
- else the one ``xbackend tune`` cached for the device, variant and shape class;
- else a size-aware default: 128×128 tiles, split along K when the output has
  fewer tiles than the GPU has multiprocessors.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from xbackend.backends.kernels import SUM_BLOCK

FAMILY = "mm_warp"
SUM_KERNEL = "mm_sum_slices"
TILE_NAMES = ("BM", "BN", "BK", "WM", "WN", "TM", "TN")
WARP = 32  # threads per warp, and per group of a warp-tiled configuration
PAD = 4  # the kernels' padding of the transposed A slab
MIN_K_SLICE = 256  # a K range shorter than this spends more on the sums than it gains
MAX_SLICES = 16


@dataclasses.dataclass(frozen=True)
class WarpConfig:
    """One configuration of the mm_warp kernel (see kernels/cuda/mm_warp.cu)."""

    BM: int
    BN: int
    BK: int
    WM: int
    WN: int
    TM: int
    TN: int
    slices: int = 1  # K ranges of a split product; 1: no split

    @property
    def group_threads(self) -> int:
        return (self.WM // self.TM) * (self.WN // self.TN)

    @property
    def threads(self) -> int:
        return (self.BM // self.WM) * (self.BN // self.WN) * self.group_threads

    @property
    def warp_tiled(self) -> bool:
        return self.group_threads == WARP

    def staged_bytes(self, itemsize: int, double_buffer: bool) -> int:
        """Shared/local memory of one block: the two slabs, twice when double-buffered."""
        stages = 2 if double_buffer else 1
        return stages * self.BK * (self.BM + PAD + self.BN) * itemsize

    def problem(self) -> str | None:
        """Why the kernel cannot be built with this configuration, or None."""
        if min(dataclasses.astuple(self)) < 1:
            return f"every parameter must be positive: {self.label}"
        if self.TM % 4 or self.TN % 4 or self.BK % 4:
            return f"TM, TN and BK must be multiples of 4: {self.label}"
        if self.WM % self.TM or self.WN % self.TN or self.BM % self.WM or self.BN % self.WN:
            return f"the patches must tile the groups, and the groups the block: {self.label}"
        if (self.BM * self.BK // 4) % self.threads or (self.BK * self.BN // 4) % self.threads:
            return (
                f"{self.threads} threads cannot share the slabs' 4-element pieces evenly: "
                f"{self.label}"
            )
        return None

    @property
    def label(self) -> str:
        split = f" K/{self.slices}" if self.slices > 1 else ""
        return (
            f"{self.BM}×{self.BN}×{self.BK} groups {self.WM}×{self.WN} "
            f"patches {self.TM}×{self.TN}{split}"
        )

    def to_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)

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

    def with_slices(self, slices: int) -> WarpConfig:
        return dataclasses.replace(self, slices=slices)


def default_config(layout: str, tile: int) -> WarpConfig:
    """The configuration of a variant at a square tile before any tuning.

    ``layout`` "block": the whole block is one group (8×8 patches at 128, 8×4 at 64);
    "warp": groups of one warp each (4×8 or 8×4 threads in a warp).
    """
    if layout == "block":
        return WarpConfig(tile, tile, 8, tile, tile, 8, 8 if tile >= 128 else 4)
    if tile >= 128:
        return WarpConfig(tile, tile, 8, 32, 64, 8, 8)
    return WarpConfig(tile, tile, 8, 32, 32, 8, 4)


def output_tiles(config: WarpConfig, M: int, N: int, batch: int = 1) -> int:
    return math.ceil(M / config.BM) * math.ceil(N / config.BN) * batch


def auto_slices(config: WarpConfig, M: int, N: int, K: int, compute_units: int) -> int:
    """K ranges for a product whose output alone would leave multiprocessors idle.

    Two blocks fit on each multiprocessor at the default tiles; the split fills at most
    those slots in one wave, so no second, nearly empty wave follows.
    """
    tiles = output_tiles(config, M, N)
    if compute_units < 1 or tiles >= compute_units:
        return 1
    return _bounded_slices((2 * compute_units) // tiles, K)


def refit_slices(config: WarpConfig, blocks: int, M: int, N: int, K: int) -> WarpConfig:
    """A tuned split, refitted to an M×N output with K: the K ranges that come closest
    to ``blocks``, the blocks of the tuned launch, within the limits of auto_slices."""
    return config.with_slices(_bounded_slices(round(blocks / output_tiles(config, M, N)), K))


def _bounded_slices(slices: int, K: int) -> int:
    """``slices`` K ranges, but none shorter than MIN_K_SLICE, at most MAX_SLICES, at least 1."""
    return max(1, min(slices, K // MIN_K_SLICE, MAX_SLICES))


def shape_class(M: int, N: int, compute_units: int) -> str:
    """How a product's output fills a device: the key ``tune`` caches a choice under.

    "small": fewer 128×128 tiles than multiprocessors (a split along K pays);
    "medium": up to 4 per multiprocessor; "large": more.
    """
    tiles = math.ceil(M / 128) * math.ceil(N / 128)
    if tiles < compute_units:
        return "small"
    if tiles <= 4 * compute_units:
        return "medium"
    return "large"


def k_slice(config: WarpConfig, K: int) -> int:
    """The length of each K range: whole slabs, ``slices`` of them covering K."""
    if config.slices <= 1:
        return max(K, 1)
    per_range = math.ceil(K / config.slices)
    return max(config.BK, math.ceil(per_range / config.BK) * config.BK)


# The tuner's block tiles, each with the patches per thread worth trying there: small
# patches for small tiles (enough threads), 8×8 and up for large ones (reuse in registers).
SEARCH = {
    (64, 64): [(8, 4), (4, 8)],
    (128, 64): [(8, 4), (4, 8), (8, 8)],
    (64, 128): [(8, 4), (4, 8), (8, 8)],
    (128, 128): [(8, 8), (16, 8), (8, 16)],
    (128, 256): [(16, 8), (8, 16)],
    (256, 128): [(16, 8), (8, 16)],
}


def candidates(layout: str) -> Iterator[WarpConfig]:
    """The tuner's search space for one layout, before the K splits are added."""
    for (bm, bn), patches in SEARCH.items():
        for (tm, tn), bk in ((patch, bk) for patch in patches for bk in (8, 16)):
            groups = [(bm, bn)] if layout == "block" else _warp_tiles(bm, bn, tm, tn)
            for wm, wn in groups:
                config = WarpConfig(bm, bn, bk, wm, wn, tm, tn)
                if config.problem() is None and 64 <= config.threads <= 256:
                    yield config


def _warp_tiles(bm: int, bn: int, tm: int, tn: int) -> list[tuple[int, int]]:
    """(WM, WN) with exactly one warp per group: 4×8 threads, so that the 8 threads of
    a quarter warp read 8 different 16-byte pieces of a B slab row."""
    tiles = []
    for rows, columns in ((4, 8),):
        wm, wn = rows * tm, columns * tn
        if bm % wm == 0 and bn % wn == 0:
            tiles.append((wm, wn))
    return tiles


def vec4_ok(itemsize: int, *elements: int) -> bool:
    """Whether 16-byte loads are aligned: 4-byte elements, every row and matrix offset
    (leading dimensions, batch strides, K ranges) a multiple of 4 elements."""
    return itemsize == 4 and all(value % 4 == 0 for value in elements)


def defines(config: WarpConfig, dtype: np.dtype[Any], vec4: bool, double_buffer: bool) -> list[str]:
    """The -D options of a configuration: its tiles, the constants, the switches."""
    options = [f"-D{name}={getattr(config, name)}" for name in TILE_NAMES]
    options += [f"-DPAD={PAD}", f"-DSUM_BLOCK={SUM_BLOCK}"]
    if dtype.itemsize == 4:
        options.append("-DLOCAL4")
    if vec4:
        options.append("-DVEC4")
    if double_buffer:
        options.append("-DDOUBLE_BUFFER")
    return options
