"""The limits of a group of workers (a thread block, a work-group) on a device.

A variant at a tile asks for so many workers in a group and so many bytes of the
memory they share; the device has a limit for each. The kernels' own rules (how a
tile splits into patches, how the slab loads share out: each family's ``requires``)
are checked here too, before any compiler sees the options.
"""

from __future__ import annotations

from collections.abc import Mapping

from xbackend.backends import block_tiles
from xbackend.backends.specs import DeviceInfo, VariantSpec
from xbackend.families.expressions import ExpressionError, evaluate
from xbackend.families.variant import broken_rule


def group_problem(
    device: DeviceInfo,
    spec: VariantSpec,
    tile: int | None,
    itemsize: int,
    workers: str,
    memory: str,
    params: Mapping[str, int] | None = None,
) -> str | None:
    """Why a group of ``spec`` at ``tile`` (or, block tiles, in ``params``) cannot run on
    ``device``."""
    if spec.tuned:
        if tile is None and params is None:
            return "block tiles need a tile or a configuration"
        block = tile if tile is not None else 0  # its configuration (params) says
        return block_tiles.group_problem(device, spec, block, itemsize, workers, memory, params)
    where = f"tile {tile}" if tile is not None else "its parameters"
    try:
        rows, columns = spec.per_thread(tile, params)
        names = spec.names_at(tile, params)
    except ExpressionError as error:
        return f"{where}: {error}"
    if not spec.group and (rows < 1 or columns < 1 or (tile or 0) % rows or (tile or 0) % columns):
        return f"tile {tile} does not split into {rows}×{columns} patches per {workers[:-1]}"
    broken = broken_rule(spec.configuration_rules, names)  # the family's own rules
    if broken:
        return broken if "does not hold" in broken else f"{where}: {broken}"
    threads = names["THREADS"]
    limit = device.max_work_group_size or 0
    if threads < 1:
        return f"{where}: a group of {threads} {workers}"
    if threads > limit:
        return f"{threads} {workers} exceed the limit of {limit} per group"
    local = device.local_mem_bytes or 0
    staged = evaluate(spec.staged, names)  # elements one group stages (its manifest)
    if staged * itemsize > local:
        return (
            f"the tiles of {staged} {itemsize}-byte elements exceed "
            f"{local} bytes of {memory} memory"
        )
    return None
