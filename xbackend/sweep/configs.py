"""The lines of a comparison: every (backend, operation, variant, tile, dtype) a plan asks for."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from xbackend import families
from xbackend.operations import Shape, operation
from xbackend.problems import dtype_named
from xbackend.results import PointRecord, now_iso
from xbackend.results.plan import Plan
from xbackend.sweep.sizes import ASSIGNMENT_VARIANTS

if TYPE_CHECKING:
    from xbackend.backends.interface import Backend

# Not rungs of the tuning ladder: the assignment's lines, and the chapter's naive4.
_NOT_LADDER = frozenset({*ASSIGNMENT_VARIANTS, "naive4"})
# Words that stand for a set of variants in ``--variants``.
VARIANT_SETS = {
    "assignment": "naive, tiled and vendor, and the variants of --kernels (the default)",
    "ladder": "every tuned rung: each variant but naive, tiled, vendor and naive4",
    "all": "every variant of each backend",
}


def ladder(opened: Sequence[tuple[str, Backend]], ops: Sequence[str]) -> list[str]:
    """The rungs of the ladder the opened backends have for ``ops``, in their order."""
    found = [v for _, backend in opened for op in ops for v in backend.variants(op)]
    return [v for v in dict.fromkeys(found) if v not in _NOT_LADDER]


def resolve_variants(
    words: Sequence[str], opened: Sequence[tuple[str, Backend]], ops: Sequence[str]
) -> list[str] | None:
    """``--variants`` as names: each set word expanded (``all``: None, every variant)."""
    if "all" in words:
        return None
    names: list[str] = []
    for word in words:
        if word == "ladder":
            names += ladder(opened, ops)
        elif word == "assignment":  # and the user's own kernels (--kernels) beside them
            names += [*ASSIGNMENT_VARIANTS, *families.user_variants(ops)]
        else:
            names.append(word)
    return list(dict.fromkeys(names))


@dataclasses.dataclass(frozen=True)
class Config:
    """One line of the comparison: a backend instance, an operation, variant, tile, dtype."""

    label: str
    backend: Backend
    op: str
    variant: str
    tile: int | None
    dtype: str
    problem: str | None = None  # why this cannot run here

    @property
    def title(self) -> str:
        return line_title(self.label, self.op, self.variant, self.tile, self.dtype)

    def record(self, run_id: str, shape: Shape, step: int, plan_batch: int) -> PointRecord:
        """This line's point at ``shape``, not measured yet (skipped, with no reason)."""
        return unmeasured(
            run_id, shape, step, plan_batch, backend=self.backend.name, label=self.label,
            device=self.backend.device.name, op=self.op, variant=self.variant, tile=self.tile,
            dtype=self.dtype,
        )  # fmt: skip


def line_title(label: str, op: str, variant: str, tile: int | None, dtype: str) -> str:
    """How progress and logs name a line: ``cuda mm tiled T=16 float32``."""
    shown = f" T={tile}" if tile else ""
    return f"{label} {op} {variant}{shown} {dtype}"


def unmeasured(
    run_id: str,
    shape: Shape,
    step: int,
    plan_batch: int,
    *,
    backend: str,
    label: str,
    device: str,
    op: str,
    variant: str,
    tile: int | None,
    dtype: str,
) -> PointRecord:
    """A line's point at ``shape``, not measured yet (skipped, with no reason): what a
    configuration here and a line of a cluster's worker (``cluster/lines.py``) start from."""
    operation_ = operation(op)
    batch = operation_.batch_of(plan_batch)
    return PointRecord(
        run_id=run_id, backend=backend, label=label, device=device, variant=variant,
        tile=tile, dtype=dtype, M=shape.M, K=shape.K, N=shape.N,
        flops=operation_.flops(shape, batch), status="skipped", op=op, batch=batch,
        timestamp=now_iso(), step=step,
    )  # fmt: skip


def configs(plan: Plan, opened: Sequence[tuple[str, Backend]]) -> list[Config]:
    """Every (backend, op, variant, tile, dtype) the plan asks for, in a stable order."""
    result = []
    for op in plan.ops:
        for label, backend in opened:
            for variant in backend.variants(op):
                if plan.variants is not None and variant not in plan.variants:
                    continue
                spec = backend.variant_spec(variant, op)
                tiles = [backend.default_tile(variant, op, dtype_named(plan.dtypes[0]))]
                if spec.takes_tile and plan.tiles:
                    tiles = [*plan.tiles]
                for tile in tiles:
                    for dtype in plan.dtypes:
                        problem = backend.configuration_problem(
                            variant, op, dtype_named(dtype), tile
                        )
                        result.append(Config(label, backend, op, variant, tile, dtype, problem))
    return result
