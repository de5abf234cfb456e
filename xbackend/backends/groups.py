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
from xbackend.families import expressions
from xbackend.families.expressions import ExpressionError, evaluate


def group_problem(
    device: DeviceInfo,
    spec: VariantSpec,
    tile: int,
    itemsize: int,
    workers: str,
    memory: str,
    params: Mapping[str, int] | None = None,
) -> str | None:
    """Why a group of ``spec`` at ``tile`` (or, block tiles, in ``params``) cannot run on
    ``device``."""
    if spec.tuned:
        return block_tiles.group_problem(device, spec, tile, itemsize, workers, memory, params)
    try:
        rows, columns = spec.per_thread(tile)
    except ExpressionError as error:
        return f"tile {tile}: {error}"
    if rows < 1 or columns < 1 or tile % rows or tile % columns:
        return f"tile {tile} does not split into {rows}×{columns} patches per {workers[:-1]}"
    names = spec.names_at(tile)
    for rule in spec.requires:  # the family's own rules (its manifest)
        try:
            holds = evaluate(rule, names)
        except ExpressionError as error:
            return f"tile {tile}: {error}"
        if not holds:
            shown = ", ".join(f"{name} = {names[name]}" for name in sorted(expressions.names(rule)))
            return f"its family's rule {rule} does not hold ({shown})"
    threads = names["THREADS"]
    limit = device.max_work_group_size or 0
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
