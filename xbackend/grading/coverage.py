"""What of C a manifest's own launch leaves without a worker, at one shape, in its words.

A family that writes its launch (``group`` and ``grid`` in family.toml) decides how many
groups run: ``grid = ["cdiv(N, TILE)", "M // TILE"]`` gives one group of 16 rows for a C
of 31 rows, and none at all below 16 rows. That is the manifest's bug, not the kernel's:
``check`` names the expression, its value at the shape and the key. A grid of zero groups
is decided here, before anything runs (no device launches it: CUDA refuses the launch,
an OpenCL runtime runs nothing), so the verdict is the same on every device. A grid that
covers some of C is said beside the rows or columns a run left unwritten: a kernel may
cover more than a worker's patch (a grid-stride loop), so only its result tells.
"""

from __future__ import annotations

import dataclasses

from xbackend.errors import XBackendError
from xbackend.families import VariantSpec
from xbackend.families.expressions import evaluate
from xbackend.operations import Shape

__all__ = ["Shortfall", "shortfall"]


@dataclasses.dataclass(frozen=True)
class Shortfall:
    """A manifest's launch that leaves some of C uncovered: in words, and whether it has
    no group at all along some axis (then nothing runs)."""

    said: str
    empty: bool


def shortfall(spec: VariantSpec, shape: Shape) -> Shortfall | None:
    """What ``spec``'s own launch at its default tile leaves of C at ``shape`` (M×K·K×N),
    or None where it covers C, where the manifest writes no launch, or where an
    expression has no value here (the run says why)."""
    launch = spec.launch
    try:
        names = {
            **spec.names_at(spec.default_tile),
            "M": shape.M, "N": shape.N, "K": shape.K, "BATCH": 1,
            "ROWS": shape.M, "COLUMNS": shape.N,
        }  # fmt: skip
        empty = _empty_before(spec, names)
        if empty is not None or not launch.grid or not launch.group:
            return empty
        groups = [int(evaluate(size, names)) for size in launch.grid]
        workers = [int(evaluate(size, names)) for size in launch.group]
        tm, tn = spec.per_thread(spec.default_tile)
    except (ArithmeticError, ValueError, TypeError, KeyError, XBackendError):
        return None
    for axis, count in enumerate(workers):
        if count < 1:  # a group of no work-item, or fewer: no launch takes it
            said = f"group[{axis}] = {launch.group[axis]} = {count} work-items: a group has "
            return Shortfall(said + "at least one, nothing runs (family.toml: group)", True)
    for axis, count in enumerate(groups):
        if count < 0:  # no launch has a negative number of groups: nothing runs
            return Shortfall(f"grid[{axis}] = {launch.grid[axis]} = {count}: fewer than no "
                             "groups, nothing runs (family.toml: grid)", True)  # fmt: skip
    # Along x the columns of C, along y its rows (a written launch is never turned:
    # ``x = "rows"`` goes with the default launch only); a 1-D launch's extent is the
    # kernel's to map, so only its emptiness is judged.
    axes = [(0, "columns", shape.N, tn), (1, "rows", shape.M, tm)][: len(groups)]
    if len(groups) < 2 or spec.storage.get("C") == "column-major":
        axes = []
    for axis, noun, size, patch in axes:
        covered = groups[axis] * workers[axis] * patch
        if covered < size:
            return Shortfall(_said(spec, axis, groups, workers, patch, noun, size), covered <= 0)
    for axis, count in enumerate(groups):
        if count < 1:  # a z axis, or a 1-D launch: no group, nothing runs
            return Shortfall(f"grid[{axis}] = {launch.grid[axis]} = {count} groups: nothing "
                             "runs (family.toml: grid)", True)  # fmt: skip
    return None


def _empty_before(spec: VariantSpec, names: dict[str, int]) -> Shortfall | None:
    """A ``before`` launch whose grid has no group along an axis at these sizes: no device
    launches it (CUDA refuses a grid of 0), so the product cannot be made."""
    for index, before in enumerate(spec.before):
        for axis, size in enumerate(before.grid):
            count = int(evaluate(size, names))
            if count < 1:
                return Shortfall(
                    f"before[{index}] ({before.function}): grid[{axis}] = {size} = {count} "
                    "groups: it cannot run (family.toml: variant.before)",
                    True,
                )
    return None


def _said(
    spec: VariantSpec, axis: int, groups: list[int], workers: list[int], patch: int, noun: str,
    size: int,
) -> str:  # fmt: skip
    """``grid[1] = M // TILE = 1 group of 16 rows covers 16 of 31 rows (family.toml: grid)``;
    the group's expression too where its groups are not a tile's worth."""
    launch, count = spec.launch, groups[axis]
    extent = workers[axis] * patch
    each = f"{count} group{'s' if count != 1 else ''} of {extent} {noun}"
    verb = "covers" if count == 1 else "cover"
    keys = "grid"
    if extent != spec.default_tile:
        value = "" if str(launch.group[axis]) == str(workers[axis]) else f" = {workers[axis]}"
        each += f" (group[{axis}] = {launch.group[axis]}{value})"
        keys = "grid, group"
    return (
        f"grid[{axis}] = {launch.grid[axis]} = {each} {verb} {count * extent} of {size} "
        f"{noun} (family.toml: {keys})"
    )
