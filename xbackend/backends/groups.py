"""The limits of a group of workers (a thread block, a work-group) on a device.

A variant at a tile asks for so many workers in a group and so many bytes of the
memory they share; the device has a limit for each. The kernels' own rules (how a
tile splits into patches, how the slab loads share out) are checked here too, before
any compiler sees the options.
"""

from __future__ import annotations

from xbackend.backends import warp
from xbackend.backends.kernels import REG_BK
from xbackend.backends.specs import DeviceInfo, VariantSpec


def group_problem(
    device: DeviceInfo,
    spec: VariantSpec,
    tile: int,
    itemsize: int,
    workers: str,
    memory: str,
    config: warp.WarpConfig | None = None,
) -> str | None:
    """Why a group of ``spec`` at ``tile`` (or in ``config``) cannot run on ``device``."""
    if spec.tuned:
        config = config or warp.default_config(
            spec.layout, tile, device.registers, double_buffered=spec.double_buffered
        )
        return _warp_problem(device, spec, config, itemsize, workers, memory)
    rows, columns = spec.per_thread(tile)
    if rows < 1 or columns < 1 or tile % rows or tile % columns:
        return f"tile {tile} does not split into {rows}×{columns} patches per {workers[:-1]}"
    threads = (tile // rows) * (tile // columns)
    if "GROUPS4" in spec.defines and (rows % 4 or columns % 4):
        return f"groups of 4 need a patch of whole groups, not {rows}×{columns}"
    if spec.family == "mm_reg" and (threads % tile or threads % REG_BK):
        # The slab loads hand each thread whole rows: see kernels/*/mm_reg.
        return f"{threads} {workers} are not a multiple of the tile {tile} and of {REG_BK}"
    limit = device.max_work_group_size or 0
    if threads > limit:
        return f"{threads} {workers} exceed the limit of {limit} per group"
    local = device.local_mem_bytes or 0
    # Elements staged in local memory: two tiles for "tiled" (mm and rmm), two
    # BK×TILE slabs for the register-blocked family, none for the naive ones.
    staged = 2 * tile * tile if spec.name == "tiled" else 0
    staged = 2 * REG_BK * tile if spec.family == "mm_reg" else staged
    if staged * itemsize > local:
        return (
            f"the tiles of {staged} {itemsize}-byte elements exceed "
            f"{local} bytes of {memory} memory"
        )
    return None


def _warp_problem(
    device: DeviceInfo,
    spec: VariantSpec,
    config: warp.WarpConfig,
    itemsize: int,
    workers: str,
    memory: str,
) -> str | None:
    problem = config.problem()
    if problem:
        return problem
    limit = device.max_work_group_size or 0
    if config.threads > limit:
        return f"{config.threads} {workers} exceed the limit of {limit} per group"
    staged = config.staged_bytes(itemsize, spec.double_buffered)
    if staged > (device.local_mem_bytes or 0):
        available = device.local_mem_bytes
        return f"the slabs' {staged} bytes exceed {available} bytes of {memory} memory"
    return None
