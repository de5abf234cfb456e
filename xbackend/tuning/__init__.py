"""``xbackend tune``: search a variant's parameters on this device and cache the best: the
block tiles of mm_warp, or the tiles a fixed-tile family declares (a user's too).

Every candidate is verified against the float64 check before its time counts; a
wrong one is reported and never chosen. The search (coarse to fine, or every
candidate: ``tune_search``) ranks the candidates it times by a few samples each;
then the finalists (the best few, and the default configuration the variant runs
without a cache) race: timed again in turns, round-robin, until the bootstrap 95%
interval of the fastest's median lies below every other's, or a time cap (``race``).
A best that does not separate from the default is a tie, and the default is kept.
The choice of each variant, operation, dtype and shape class goes to the tune cache
with its margin and intervals (``tune_cache.py``, whose names this module also gives:
``load_entries``, ``lookup``, ``attach``, ...), which the tuned variants then take
their configurations from. What is minimised is the kernel time, or with the objective
``energy`` the joules per product read from the device's energy counter (``objective.py``).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from xbackend.backends.compiled import CompiledBackend
from xbackend.backends.interface import Backend
from xbackend.errors import XBackendError
from xbackend.launches.choices import Candidate, Trial, shape_class
from xbackend.launches.geometries import geometry_of
from xbackend.measuring.timing import Sampling
from xbackend.operations import OPERATIONS
from xbackend.problems import Reference, Shape, flops, make_operands, output_size
from xbackend.tuning.cache import (
    CACHE_ENV,
    FORMAT,
    NEIGHBOUR,
    CachedChoices,
    ForeignCache,
    TuneCacheWarning,
    attach,
    cache_path,
    cached_choices,
    check_writable,
    choose,
    current_build,
    entry_key,
    entry_problem,
    load_entries,
    lookup,
    save_entries,
    update_entries,
)
from xbackend.tuning.objective import (
    OBJECTIVES,
    Objective,
    counter_problem,
    digits,
    entry_fields,
    objective_of,
)
from xbackend.tuning.racing import (
    FINALIST_WITHIN,
    FINALISTS,
    MAX_RACE_SAMPLES,
    MIN_RACE_SAMPLES,
    TURN_SAMPLES,
    CandidateFailed,
    Finalist,
    Race,
    Sampler,
    race,
    verdict,
)
from xbackend.tuning.searching import FINALIST_TIME_S, SEARCHES, TuneItem, items, search
from xbackend.tuning.trials import IN_PROCESS, Measure, Product, time_trial, window_joules

__all__ = [
    "CACHE_ENV",
    "FINALISTS",
    "FINALIST_WITHIN",
    "FORMAT",
    "MAX_RACE_SAMPLES",
    "MIN_RACE_SAMPLES",
    "NEIGHBOUR",
    "OBJECTIVES",
    "OPS",
    "SEARCHES",
    "TURN_SAMPLES",
    "CachedChoices",
    "CandidateFailed",
    "Finalist",
    "ForeignCache",
    "Measure",
    "Objective",
    "Race",
    "Sampler",
    "Trial",
    "TuneCacheWarning",
    "TuneItem",
    "TuneResult",
    "attach",
    "cache_entry",
    "cache_path",
    "cached_choices",
    "check_writable",
    "choose",
    "counter_problem",
    "current_build",
    "entry_problem",
    "finalists",
    "gflops_text",
    "items",
    "load_entries",
    "lookup",
    "race",
    "save_entries",
    "search_space",
    "tune",
    "update_entries",
    "verdict",
]

# The operations tuned: those that take a cached choice of their own (bmm takes none).
OPS = tuple(name for name, op in OPERATIONS.items() if name in op.tuned_as)

# How the search and the race sample a configuration: each sample a batch of launches
# back to back, about BATCH_S of them (one launch where it is longer), so that the
# uploads and the download of each sample cost little beside the kernels they time.
BATCH_S = 0.01
SAMPLING = Sampling(short_kernel_s=math.inf, batch_target_s=BATCH_S)


@dataclasses.dataclass
class TuneResult:
    variant: str
    op: str
    shape: Shape
    shape_class: str
    trials: list[Trial]
    untuned: Trial  # what the variant ran before this search (a cached or default choice)
    seconds: float = 0.0  # the search's time
    default: Trial | None = None  # the variant's configuration without a cache
    race: Race | None = None  # the finalists' race; None: not run (``--finalist-time 0``)
    objective: Objective = dataclasses.field(default_factory=Objective)  # what was minimised

    @property
    def untuned_tflops(self) -> float | None:
        return self.untuned.tflops

    @property
    def best(self) -> Trial | None:
        """The best correct candidate of the search (the fastest, or in an energy tune the
        fewest joules: ``Trial.score``); the untuned choice where it beat them all (it can
        lie outside the search space: a split refitted from another size)."""
        timed = [trial for trial in (*self.trials, self.untuned) if trial.tflops is not None]
        return max(timed, key=lambda trial: trial.score) if timed else None

    @property
    def chosen(self) -> Trial | None:
        """What goes to the cache: the race's winner at its race median (of joules in an
        energy tune, its rate then the search's), else the best."""
        if self.race is None:
            return self.best
        winner = self.race.winner
        if self.objective.energy:
            known = [t for t in (*self.trials, self.untuned, self.default) if t is not None]
            rate = next((t.tflops for t in known if t.config == winner.config and t.tflops), None)
            return Trial(winner.config, rate, "ok", winner.median_s)
        return Trial(winner.config, flops(self.op, self.shape) / winner.median_s / 1e12, "ok")


def finalists(result: TuneResult) -> list[Finalist]:
    """The configurations worth a race: the search's best two, the others within
    FINALIST_WITHIN of the best (FINALISTS at most), and the default, each once."""
    timed = [trial for trial in (*result.trials, result.untuned) if trial.tflops]
    ranked = sorted(timed, key=lambda trial: -trial.score)
    chosen: list[Finalist] = []
    for trial in ranked:
        close = trial.score >= (1 - FINALIST_WITHIN) * ranked[0].score
        if len(chosen) >= FINALISTS or (len(chosen) >= 2 and not close):
            break
        if all(trial.config != finalist.config for finalist in chosen):
            chosen.append(Finalist(trial.config))
    default = result.default
    if default is not None and default.tflops:
        known = next((f for f in chosen if f.config == default.config), None)
        if known is None:
            chosen.append(Finalist(default.config, default=True))
        else:
            known.default = True
    return chosen


def search_space(
    backend: Backend, variant: str, shape: Shape, itemsize: int, op: str = "mm"
) -> list[Candidate]:
    """The candidates of ``variant`` that this device can run, as its geometry gives
    them: a fixed-tile variant's tiles, each combination of a family's parameters, block
    tiles with K splits for outputs too small to fill it."""
    spec = backend.variant_spec(variant, op)
    geometry = geometry_of(spec)
    if geometry is None or not isinstance(backend, CompiledBackend):
        return []
    return geometry.space(backend, spec, shape, itemsize, op)


def tune(
    backend: Backend,
    variants: Iterable[str] | None,
    shapes: Iterable[Shape],
    dtype: np.dtype,
    *,
    ops: Iterable[str] = ("mm",),
    seed: int = 0,
    samples: int = 5,
    finalist_time_s: float = FINALIST_TIME_S,
    how: str = "coarse",
    progress: Callable[[str], None] = print,
    path: Path | None = None,
    objective: Objective | None = None,
    measure: Measure = IN_PROCESS,
) -> list[TuneResult]:
    """Search the candidates of every variant (None: every tuned one) at every shape
    (``how``: coarse to fine, or exhaustive; see ``tune_search``), for each operation of
    ``ops`` that the variant is tuned for (rmm: at shapes with even M and N; a variant
    with nothing to tune for an operation is said through ``progress``: ``tunable``);
    race the finalists for up to ``finalist_time_s`` (0: no race, the search's best is
    chosen); cache the choice of each. ``objective``: what is minimised (None: the
    kernel time); for energy, a device without a counter is refused (XBackendError)
    before anything runs. ``measure``: how each candidate is measured (``trials.py``: a
    user's kernels in a process of their own, where ``tune --kernels`` asks)."""
    objective = objective or Objective()
    problem = counter_problem(backend) if objective.energy else None
    if problem:
        raise XBackendError(problem)
    results = []
    found, notes = items(backend, variants, shapes, ops, dtype)
    for note in notes:
        progress(note)
    if backend.choices is None:  # the untuned choice is the cached one, as in a run
        attach(backend)
    operands: dict[Shape, tuple[np.ndarray, np.ndarray]] = {}
    references: dict[tuple[Shape, str], Reference] = {}
    for item in found:
        if item.shape not in operands:  # one size's operands at a time
            operands = {item.shape: make_operands(item.shape, seed=seed, dtype=dtype)}
        A, B = operands[item.shape]
        if (item.shape, item.op) not in references:
            references = {(item.shape, item.op): Reference.of(A, B, item.op)}
        product = Product(item.op, item.shape, A, B, references[item.shape, item.op])
        result = _search(backend, product, item.variant, samples, how, progress, objective,
                         measure)  # fmt: skip
        results.append(result)
        if result.best is not None and finalist_time_s > 0:
            try:
                result.race = _race(backend, product, result, finalist_time_s, progress, measure)
            except CandidateFailed as error:  # every finalist: nothing is sure enough to keep
                progress(f"  every finalist failed in the race ({error}): nothing cached")
                continue
        if result.chosen is not None:
            _remember(backend, product, result, path, progress)
    return results


def _search(
    backend: Backend,
    product: Product,
    variant: str,
    samples: int,
    how: str,
    progress: Callable[[str], None],
    objective: Objective,
    measure: Measure,
) -> TuneResult:
    """Time the candidates the search picks, then the untuned choice and the default,
    of one variant for one product. The untuned choice comes after the search, on a
    device its kernels have woken: first, it would meet the clocks the host's float64
    reference let fall (16.9 TFLOP/s, against 21.0 in the race after, on an H200)."""
    key = shape_class(*product.output, backend.device.compute_units or 0)
    space = search_space(backend, variant, product.shape, product.A.itemsize, product.op)
    geometry = geometry_of(backend.variant_spec(variant, product.op))
    chosen_per_product = geometry is not None and geometry.per_product
    coarse = " (coarse to fine)" if how == "coarse" and chosen_per_product else ""
    progress(f"{product.shape} ({key}) {product.op} {variant}: {len(space)} candidates{coarse}")
    count = 0
    # Built here ahead of their runs only where they run here, not in a process of their own.
    prebuilt = chosen_per_product and not measure.isolates(backend, variant, product.op)

    def time_one(config: Candidate | None) -> Trial:
        return time_trial(backend, product, variant, config, samples, objective, SAMPLING,
                          measure)  # fmt: skip

    def time_batch(batch: Sequence[Candidate]) -> list[Trial]:
        nonlocal count
        # Build a batch of block tiles together first, in parallel where the backend can.
        if prebuilt:
            configurations = [config.to_dict() for config in batch]
            backend.prebuild(variant, product.op, product.A, product.B, configurations)
        timed = []
        for config in batch:
            count += 1
            trial = time_one(config)
            timed.append(trial)
            speed = f"{gflops_text(trial.tflops)} GFLOP/s" if trial.tflops else trial.status
            energy = f", {trial.joules:.4g} J a product" if trial.joules else ""
            progress(f"  [{count}] {config.label}: {speed}{energy}")
        return timed

    started = time.perf_counter()
    trials = search(space, time_batch, how, geometry)
    seconds = round(time.perf_counter() - started, 1)
    untuned = time_one(None)
    default = _default(backend, time_one, untuned)
    return TuneResult(variant, product.op, product.shape, key, trials, untuned, seconds, default,
                      objective=objective)  # fmt: skip


def _default(backend: Backend, timed: Callable[[None], Trial], untuned: Trial) -> Trial:
    """The variant's configuration without a cache, timed (the untuned one where the
    cache holds no choice for the product: then they are the same)."""
    held = backend.choices
    backend.use_choices(None)
    try:
        default = timed(None)
    finally:
        backend.use_choices(held)
    return untuned if default.config == untuned.config else default


def _race(
    backend: Backend,
    product: Product,
    result: TuneResult,
    time_cap_s: float,
    progress: Callable[[str], None],
    measure: Measure,
) -> Race:
    """Race ``result``'s finalists on the device (see ``race``), and say who won. In an
    energy tune a turn is one window a finalist, its sample the joules per product."""
    objective = result.objective

    def sampler(config: Candidate, count: int) -> list[float]:
        if objective.energy:
            return [window_joules(backend, product, result.variant, config, objective,
                                  SAMPLING, measure) for _ in range(count)]  # fmt: skip
        measured = measure(
            backend, product.A, product.B, result.variant, op=product.op,
            params=config.to_dict(), sampling=SAMPLING, warmup=1, samples=count,
            min_samples=count,
        )  # fmt: skip
        return measured.kept[0]  # without samples the device marked (throttled, hold)

    racers = finalists(result)
    progress(f"  race of {len(racers)} finalists (at most {time_cap_s:g} s)")
    outcome = race(racers, sampler, time_cap_s, turn_samples=objective.turn_samples)
    for finalist in racers:
        if finalist.failure:
            role = " (default)" if finalist.default else ""
            progress(f"  {finalist.config.label}{role}: left the race: {finalist.failure}")
    racers = [finalist for finalist in racers if not finalist.failure]
    if objective.energy:
        for finalist in racers:
            low, high = finalist.interval_s
            role = " (default)" if finalist.default else ""
            progress(f"  {finalist.config.label}{role}: {finalist.median_s:.4g} J a product "
                     f"(95%: {low:.4g}–{high:.4g}; {len(finalist.samples_s)} windows)")  # fmt: skip
        return outcome
    work = flops(product.op, product.shape)
    for finalist in racers:
        low, high = (work / seconds / 1e9 for seconds in reversed(finalist.interval_s))
        role = " (default)" if finalist.default else ""
        progress(
            f"  {finalist.config.label}{role}: {gflops_text(work / finalist.median_s / 1e12)} "
            f"GFLOP/s (95%: {gflops_text(low / 1e3)}–{gflops_text(high / 1e3)}; "
            f"{len(finalist.samples_s)} samples)"
        )
    return outcome


def cache_entry(result: TuneResult, build: dict[str, str]) -> dict[str, Any]:
    """The cache entry of ``result``'s choice, with the blocks its launch had (see
    lookup), and the race's margin, intervals (seconds of the median kernel time) and
    verdict where it ran."""
    chosen = result.chosen
    assert chosen is not None
    config = chosen.config
    entry: dict[str, Any] = {
        "params": config.to_dict(),
        "blocks": config.blocks(*output_size(result.op, result.shape)),
        # 4 significant digits, however small (none where an energy race's winner had none)
        "tflops": None if chosen.tflops is None else digits(chosen.tflops),
        "shape": str(result.shape),
        "tuned_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seconds": result.seconds,
        "build": build,
    }
    outcome = result.race
    if outcome is not None:
        entry["tie"] = outcome.tie
        entry["separated"] = outcome.separated
        entry["interval_s"] = [digits(value) for value in outcome.winner.interval_s]
        entry["race_samples"] = len(outcome.winner.samples_s)
        entry["race_seconds"] = outcome.seconds
        if outcome.runner_up is not None and outcome.margin is not None:
            entry["margin"] = digits(outcome.margin)
            entry["runner_up_interval_s"] = [
                digits(value) for value in outcome.runner_up.interval_s
            ]
    if result.objective.energy:  # the race's intervals are of joules: named as such
        entry.pop("interval_s", None)
        entry.pop("runner_up_interval_s", None)
    return {**entry, **entry_fields(result.objective, chosen, outcome)}


def gflops_text(tflops: float) -> str:
    """A rate in GFLOP/s, three significant digits or the whole number: a CPU's 14.3,
    a GPU's 44820 (neither 0.01 TFLOP/s nor 4.48e+04)."""
    gflops = tflops * 1000
    return f"{gflops:.0f}" if gflops >= 1000 else f"{gflops:.3g}"


def _remember(
    backend: Backend, product: Product, result: TuneResult, path: Path | None,
    progress: Callable[[str], None],
) -> None:  # fmt: skip
    """Cache the choice of ``result``; say so where it replaces a choice tuned for the
    other objective (a key holds one choice: ``objective.py``)."""
    key = entry_key(backend.name, backend.device.name, result.variant, product.op,
                    product.A.dtype.name, result.shape_class)  # fmt: skip
    before = load_entries(path).get(key)
    wanted = result.objective.name
    if before is not None and objective_of(before) != wanted:
        progress(f"  replaces the choice tuned for {objective_of(before)} of {key} ({wanted} now)")
    entry = cache_entry(result, current_build(backend, result.variant, product.op))
    update_entries({key: entry}, path)
