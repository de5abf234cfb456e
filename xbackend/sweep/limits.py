"""The largest product each backend runs: sizes grown until one no longer fits or no longer
meets the time budget, then bisected, behind ``xbackend limits``.

For each (backend, operation, dtype) line, square sizes N×N · N×N start at ``start`` and
double while a size runs, verified, within the budget; then the gap between the largest
that ran and the first that did not is bisected to a step of ``min_step`` (or 1/16 of the
size), in at most ``MAX_BISECTIONS`` steps. A size does not fit when
``measure.memory_problem`` says so or the backend refuses it (out of memory, one
buffer's limit, or a parameter it cannot take, such as CLBlast's 32-bit offsets or CUDA's
grid; the kernels' own offsets turn 64-bit where a product needs it, so they refuse no
size that memory holds); it does not meet the budget when its one timed run, or the time
predicted from the largest size that ran by the flop ratio, exceeds it. The prediction
comes first, so no hour-long product starts.

Every size tried is one measurement (the first, checked run and one timed run), checked
as ``compare`` checks, recorded as a :class:`PointRecord` through the results writer.
A wrong result or an error ends the line. A user's kernels (``--kernels``) are measured as
``compare`` measures them, in a process of their own under the deadline
(``isolation.py``): a hang or a crash is that size's error, and the other lines go on.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from xbackend.errors import DeviceOutOfMemory, UnsupportedParameter
from xbackend.measuring.timing import Sampling
from xbackend.operations import DEFAULT, Shape, operation
from xbackend.problems import AUTO, dtype_named
from xbackend.results import PointRecord, ResultsWriter, RunHeader, now_iso
from xbackend.results.plan import Plan
from xbackend.sweep.configs import Config, configs, resolve_variants
from xbackend.sweep.cost import CostModel
from xbackend.sweep.environment import environment
from xbackend.sweep.isolation import Isolation
from xbackend.sweep.measure import Inputs, Measurer, measure_point, memory_problem

if TYPE_CHECKING:
    from xbackend.backends.interface import Backend

# Bisection stops when the gap is at most this, or 1/16 of the largest size that ran.
MIN_STEP = 256
MAX_BISECTIONS = 6
MAX_DOUBLINGS = 24  # a guard: memory stops growth long before 2^24 times the start
START_GPU = 1024
START_OTHER = 256
PREFERRED_VARIANT = "vendor"
FALLBACK_VARIANT = "tiled"
# Errors that mean the size does not fit this backend, not that something broke.
_REFUSALS: tuple[type[Exception], ...] = (DeviceOutOfMemory, UnsupportedParameter, MemoryError)


@dataclasses.dataclass(frozen=True)
class Limit:
    """One line's limits: the largest size that ran and the first that did not."""

    config: Config
    largest: PointRecord | None = None  # None: not even the smallest size tried ran
    first_failed: PointRecord | None = None  # None: growth never failed (a guard stopped it)
    why: str = ""  # why ``first_failed`` did not run, or did not count
    records: tuple[PointRecord, ...] = ()

    @property
    def device_mem_bytes(self) -> int | None:
        return self.config.backend.device.global_mem_bytes


def needed_bytes(op: str, dtype: str, n: int) -> int:
    """What A, B and C of the N×N·N×N product take on the device."""
    return sum(operation(op).elements(Shape(n, n, n))) * dtype_named(dtype).itemsize


def default_start(backend: Backend) -> int:
    return START_GPU if backend.device.kind == "gpu" else START_OTHER


def default_variant(backend: Backend, op: str, dtype: str) -> str:
    """``vendor`` where the backend runs it for ``op`` in ``dtype``, else ``tiled``."""
    runnable = backend.runnable_variants(op, dtype_named(dtype))
    return PREFERRED_VARIANT if PREFERRED_VARIANT in runnable else FALLBACK_VARIANT


def line_config(
    label: str, backend: Backend, op: str, dtype: str, variant: str, tile: int | None = None
) -> Config:
    """The configuration of one line, with why it cannot run here where it cannot."""
    found = line_configs(label, backend, op, dtype, [variant], [tile] if tile else None)
    return found[0]


def line_configs(
    label: str,
    backend: Backend,
    op: str,
    dtype: str,
    variants: Sequence[str],
    tiles: Sequence[int] | None = None,
) -> list[Config]:
    """The lines of ``variants`` (names; at each of ``tiles`` where a variant takes a
    tile) on one backend; a variant it does not have is one line that cannot run."""
    plan = Plan(shapes=[], ops=[op], dtypes=[dtype], variants=list(variants),
                tiles=list(tiles) if tiles else None)  # fmt: skip
    found = configs(plan, [(label, backend)])
    missing = [v for v in variants if v not in {config.variant for config in found}]
    for variant in missing:
        problem = f"{backend.name} has no variant {variant!r} of {op}"
        found.append(Config(label, backend, op, variant, None, dtype, problem))
    return found


@dataclasses.dataclass
class _Line:
    """One line's search: what it measured so far, and where its records go."""

    config: Config
    budget_s: float
    seed: int
    check: str
    run_id: str
    record: Callable[[PointRecord], None]
    measurer: Measurer | None = None  # None: in this process (a user's kernel: isolation.py)
    tried: list[PointRecord] = dataclasses.field(default_factory=list)
    best: PointRecord | None = None  # the largest size that ran within the budget

    def attempt(self, n: int) -> tuple[bool, str]:
        """Try the N×N product: whether it ran within the budget, and why not."""
        blank = self.config.record(self.run_id, Shape(n, n, n), len(self.tried) + 1, 1)
        point, why = self._measured(blank)
        self.tried.append(point)
        self.record(point)
        if why:
            return False, why
        self.best = point if self.best is None or n > self.best.M else self.best
        return True, ""

    def _measured(self, blank: PointRecord) -> tuple[PointRecord, str]:
        """The point at ``blank``'s size, and why it does not count as run ("" if it does)."""
        config = self.config
        shape = Shape(blank.M, blank.K, blank.N)
        reason = config.problem or memory_problem(config, shape, 1, self.check) or ""
        reason = reason or self._over_budget(blank.flops)
        if reason:
            return dataclasses.replace(blank, reason=reason), reason
        plan = Plan(
            shapes=[shape],
            ops=[config.op],
            dtypes=[config.dtype],
            variants=[config.variant],
            seed=self.seed,
            budget_s=0.0,
            check=self.check,
            sampling=Sampling(warmup=0, max_samples=1, min_samples=1, short_kernel_s=0.0),
        )
        inputs = Inputs(shape, self.seed, 1)
        point = measure_point(
            plan, config, blank, inputs, CostModel(), {}, _REFUSALS, self.measurer
        )
        if point.status == "skipped":  # refused: the size does not fit
            return point, point.reason
        if point.status == "error":
            return point, f"error: {point.reason.splitlines()[0]}"
        if point.status != "ok":
            return point, f"{point.status}: {point.reason}"
        took_s = (point.end_to_end_s or {})["median"]
        if self.budget_s > 0 and took_s > self.budget_s:
            return point, f"took {took_s:.3g} s, over the budget of {self.budget_s:g} s"
        return point, ""

    def _over_budget(self, flops: int) -> str:
        """Why a size would exceed the budget, predicted from the largest that ran."""
        if self.best is None or self.budget_s <= 0 or self.best.end_to_end_s is None:
            return ""
        predicted_s = self.best.end_to_end_s["median"] * flops / self.best.flops
        if predicted_s <= self.budget_s:
            return ""
        return (
            f"predicted {predicted_s:.3g} s from {self.best.M}×{self.best.M} "
            f"exceeds the budget of {self.budget_s:g} s (--budget)"
        )


def _ends_line(why: str) -> bool:
    """A wrong result or an error: a smaller size would tell nothing more."""
    return why.startswith(("mismatch", "error"))


def find_limit(
    config: Config,
    *,
    start: int,
    budget_s: float,
    record: Callable[[PointRecord], None],
    seed: int = 0,
    check: str = AUTO,
    min_step: int = MIN_STEP,
    run_id: str = "",
    measurer: Measurer | None = None,
) -> Limit:
    """Grow, then bisect, ``config``'s square size from ``start``; each point to ``record``
    (measured by ``measurer``; None: in this process)."""
    line = _Line(config, budget_s, seed, check, run_id, record, measurer)
    low, high, why = 0, 0, ""
    n = start
    for _ in range(MAX_DOUBLINGS):
        ran, why = line.attempt(n)
        if not ran:
            high = n
            break
        low, n = n, 2 * n
    high_why = why
    for _ in range(MAX_BISECTIONS):
        if not high or config.problem or _ends_line(high_why):
            break
        if high - low <= max(min_step, low // 16):
            break
        middle = _middle(config.op, low, high)
        if middle in (low, high):
            break
        ran, why = line.attempt(middle)
        if ran:
            low = middle
        else:
            high, high_why = middle, why
    first = next((p for p in line.tried if high == p.M), None) if high else None
    return Limit(config, line.best, first, high_why if high else "", tuple(line.tried))


def _middle(op: str, low: int, high: int) -> int:
    """Halfway between, rounded down to a multiple of 16 where there is room, and a size
    ``op`` takes."""
    middle = (low + high) // 2
    rounded = middle - middle % 16
    middle = rounded if rounded > low else middle
    while middle > low and operation(op).shape_problem(middle, middle):
        middle -= 1
    return middle


def limits(
    opened: Sequence[tuple[str, Backend]],
    out: Path,
    *,
    ops: Sequence[str] = (DEFAULT,),
    dtypes: Sequence[str] = ("float32",),
    variants: Sequence[str] | None = None,
    tiles: Sequence[int] | None = None,
    start: int | None = None,
    budget_s: float = 20.0,
    seed: int = 0,
    min_step: int = MIN_STEP,
    log: Callable[[str], None] = print,
    isolation: Isolation | None = None,
) -> list[Limit]:
    """Each opened backend's limits for every op, dtype and variant (names or sets, as
    ``--variants`` takes them; default: each backend's preferred), recorded into ``out``;
    a user's kernels measured through ``isolation`` (None: one of its own)."""
    run_id = uuid.uuid4().hex[:12]
    first = start or min(default_start(backend) for _, backend in opened)
    header = RunHeader(
        run_id=run_id,
        timestamp=now_iso(),
        environment=environment(),
        plan=Plan(
            shapes=[Shape(first, first, first)],
            ops=list(ops),
            dtypes=list(dtypes),
            variants=list(variants) if variants else None,
            tiles=list(tiles or []) or None,
            seed=seed,
            budget_s=budget_s,
            sampling=Sampling(warmup=0, max_samples=1, min_samples=1),
        ),
        devices={label: backend.device.to_dict() for label, backend in opened},
    )
    found = []
    with isolation or Isolation() as isolating, ResultsWriter(out, header) as writer:

        def record(point: PointRecord) -> None:
            writer.append(point)
            log(f"  {point.label} {point.op} {point.dtype} {point.M}: {_said(point)}")

        for label, backend in opened:
            for op in ops:
                for dtype in dtypes:
                    for config in _lines(label, backend, op, dtype, variants, tiles):
                        found.append(
                            find_limit(
                                config, start=start or default_start(backend),
                                budget_s=budget_s, record=record, seed=seed,
                                min_step=min_step, run_id=run_id,
                                measurer=isolating.measurer(config),
                            )
                        )  # fmt: skip
    return found


def _lines(
    label: str,
    backend: Backend,
    op: str,
    dtype: str,
    variants: Sequence[str] | None,
    tiles: Sequence[int] | None,
) -> list[Config]:
    """One backend's lines for ``op`` in ``dtype``: ``variants`` with the sets expanded
    (``all``: every variant the backend has), or its preferred variant."""
    if not variants:
        return [line_config(label, backend, op, dtype, default_variant(backend, op, dtype))]
    names = resolve_variants(variants, [(label, backend)], [op])
    return line_configs(label, backend, op, dtype, names or backend.variants(op), tiles)


def _said(point: PointRecord) -> str:
    if point.status == "ok" and point.end_to_end_s is not None:
        return f"ok, {point.end_to_end_s['median']:.3g} s"
    return f"{point.status} ({point.reason.splitlines()[0] if point.reason else ''})"


def _gib(nbytes: int | None) -> str:
    return "—" if not nbytes else f"{nbytes / 2**30:.3g} GiB"


_HEADER = ("backend", "device", "op", "variant", "tile", "dtype", "largest that ran", "time",
           "needs", "first that did not", "why", "would need", "device memory")  # fmt: skip


def _row(limit: Limit) -> tuple[str, ...]:
    config, best, first = limit.config, limit.largest, limit.first_failed
    size = time = needs = "—"
    if best is not None:
        size, needs = str(best.M), _gib(needed_bytes(config.op, config.dtype, best.M))
        time = f"{(best.end_to_end_s or {}).get('median', 0.0):.3g} s"
    failed = would = "—"
    why = limit.why.splitlines()[0] if limit.why else "none within the guard"
    if first is not None:
        failed, would = str(first.M), _gib(needed_bytes(config.op, config.dtype, first.M))
    return (config.label, config.backend.device.name[:28], config.op, config.variant,
            str(config.tile or "—"), config.dtype, size, time, needs, failed, why[:90], would,
            _gib(limit.device_mem_bytes))  # fmt: skip


def limits_table(found: Sequence[Limit]) -> str:
    """One row per line: the largest size that ran, the first that did not, and why."""
    rows = [_HEADER, *(_row(limit) for limit in found)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_HEADER))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in rows]  # fmt: skip
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)
