"""The variants of the kernel files, one table for both compiled backends.

Each backend names them in its own words (threads and shared memory, work-items
and local memory); ``with_vendor`` adds the vendor library's line.
"""

from __future__ import annotations

from typing import Any

from xbackend.backends import warp
from xbackend.backends.specs import VariantSpec, VariantTable


def _reg2d(name: str, description: str, *defines: str) -> VariantSpec:
    """A 2-D register-blocked variant of kernels/*/mm_reg: (TILE/16)² outputs per thread,
    the outputs' layout chosen by ``defines`` (see the kernel file)."""
    return VariantSpec(
        name,
        description,
        kernel="mm_reg",
        tiles=(64, 128),
        default_tile=128,
        family="mm_reg",
        microtile=lambda tile: (tile // 16, tile // 16),
        defines=defines,
    )


def _warp(name: str, description: str, layout: str, *defines: str) -> VariantSpec:
    """A variant of kernels/*/mm_warp; its tile is BM = BN of the untuned default."""
    return VariantSpec(
        name,
        description,
        kernel="mm_warp",
        tiles=(64, 128),
        default_tile=128,
        family=warp.FAMILY,
        defines=defines,
        layout=layout,
    )


def with_vendor(table: VariantTable, description: str, reduced: str | None = None) -> VariantTable:
    """``table`` with a ``vendor`` variant of mm: the vendor's BLAS on the same buffers;
    and of rmm, described by ``reduced``, where the backend has one."""
    table = {**table, "mm": {**table["mm"], "vendor": VariantSpec("vendor", description)}}
    if reduced:
        table["rmm"] = {**table["rmm"], "vendor": VariantSpec("vendor", reduced)}
    return table


def compiled_variants(worker: str, memory: str) -> VariantTable:
    """The variants of the kernel files, in one backend's words ("thread", "shared")."""
    tiles: dict[str, Any] = {"tiles": (8, 16, 32), "default_tile": 16}
    mm = {
        "naive": VariantSpec(
            "naive",
            f"one {worker} per element, operands from global memory",
            kernel="mm_naive",
            family="mm",
            **tiles,
        ),
        "tiled": VariantSpec(
            "tiled",
            f"TILE×TILE tiles of A and B staged in {memory} memory",
            kernel="mm_tiled",
            family="mm",
            **tiles,
        ),
        # The ladder above tiled (kernels/*/mm_reg): TILE is the block's tile of C.
        "reg1d": VariantSpec(
            "reg1d",
            f"1-D register blocking: each {worker} computes a column of TILE/8 results",
            kernel="mm_reg",
            tiles=(32, 64),
            default_tile=64,
            family="mm_reg",
            microtile=lambda tile: (tile // 8, 1),
        ),
        "reg2d": _reg2d(
            "reg2d", f"2-D register blocking: each {worker} computes a (TILE/16)² patch"
        ),
        "reg2d_cf": _reg2d(
            "reg2d_cf",
            f"reg2d with strided patches: conflict-free {memory}-memory reads",
            "STRIDED",
        ),
        "reg2d_g4": _reg2d(
            "reg2d_g4",
            f"reg2d with groups of 4 outputs strided across {worker}s: 16-byte, "
            "conflict-free reads",
            "GROUPS4",
        ),
        # The top of the ladder (kernels/*/mm_warp): parameters chosen per product.
        "vec4": _warp(
            "vec4",
            f"reg2d_g4 with 16-byte loads from global memory and padded {memory} slabs",
            "block",
        ),
        "vec4_db": _warp(
            "vec4_db",
            "vec4, double-buffered: the next slabs load during this one",
            "block",
            "DOUBLE_BUFFER",
        ),
        "warp": _warp("warp", "vec4 with warp tiles: each warp computes its own part", "warp"),
        "warp_db": _warp(
            "warp_db",
            "warp, double-buffered: the next slabs load during this one",
            "warp",
            "DOUBLE_BUFFER",
        ),
    }
    rmm = {
        # Its 4·K products are added one by one, as the definition reads: an infinity
        # times products of both signs (−inf·0.75 + −inf·(−0.25)) is NaN where NumPy,
        # summing the pairs first, gives ±inf. The chapter's kernel keeps its arithmetic.
        "naive4": VariantSpec(
            "naive4",
            "4·K multiplications per element, from the definition "
            "(an Inf can give NaN where NumPy gives ±Inf)",
            kernel="rmm_naive4",
            family="rmm",
            **tiles,
        ),
        "naive": VariantSpec(
            "naive",
            "K multiplications: the row and column pairs summed first",
            kernel="rmm_naive",
            family="rmm",
            **tiles,
        ),
        "tiled": VariantSpec(
            "tiled",
            f"pair sums made while loading {memory}-memory tiles",
            kernel="rmm_tiled",
            family="rmm",
            **tiles,
        ),
        # The top of the mm ladder, with the pair sums made in its slab loads.
        "vec4_db": _warp(
            "vec4_db",
            "mm's vec4_db, the pairs summed as its 16-byte loads bring them",
            "block",
            "DOUBLE_BUFFER",
        ),
        "warp_db": _warp(
            "warp_db",
            "mm's warp_db, the pairs summed as its 16-byte loads bring them",
            "warp",
            "DOUBLE_BUFFER",
        ),
    }
    return {"mm": mm, "bmm": mm, "rmm": rmm}
