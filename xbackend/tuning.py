"""``xbackend tune``: search the mm_warp parameters on this device and cache the best.

Every candidate is verified against the float64 check before its time counts; a
wrong one is reported and never chosen. The best of each variant, operation, dtype
and shape class goes to the tune cache (``tune_cache.py``, whose names this module
also gives: ``load_entries``, ``lookup``, ``attach``, ...), which the tuned variants
then take their configurations from.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from xbackend.backends import warp
from xbackend.backends.interface import Backend
from xbackend.operations import OPERATIONS, operation
from xbackend.problems import Reference, Shape, check, flops, make_operands, output_size
from xbackend.tune_cache import (
    CACHE_ENV,
    FORMAT,
    NEIGHBOUR,
    CachedChoices,
    TuneCacheWarning,
    attach,
    cache_path,
    cached_choices,
    choose,
    current_build,
    entry_key,
    entry_problem,
    load_entries,
    lookup,
    save_entries,
    update_entries,
)

__all__ = [
    "CACHE_ENV",
    "FORMAT",
    "NEIGHBOUR",
    "OPS",
    "SPLITS",
    "CachedChoices",
    "Trial",
    "TuneCacheWarning",
    "TuneResult",
    "attach",
    "cache_path",
    "cached_choices",
    "choose",
    "current_build",
    "entry_problem",
    "load_entries",
    "lookup",
    "save_entries",
    "search_space",
    "tune",
    "update_entries",
]

SPLITS = (1, 2, 3, 4, 6)  # K ranges tried where the output is small
# The operations tuned: those that take a cached choice of their own (bmm takes none).
OPS = tuple(name for name, op in OPERATIONS.items() if name in op.tuned_as)


@dataclasses.dataclass
class Trial:
    config: warp.WarpConfig
    tflops: float | None  # None: not timed (wrong result or error)
    status: str  # "ok", "wrong", or the error


@dataclasses.dataclass
class TuneResult:
    variant: str
    op: str
    shape: Shape
    shape_class: str
    trials: list[Trial]
    untuned: Trial  # what the variant ran before this search (a cached or default choice)
    seconds: float = 0.0  # the search's time

    @property
    def untuned_tflops(self) -> float | None:
        return self.untuned.tflops

    @property
    def best(self) -> Trial | None:
        """The fastest correct candidate; the untuned choice where it beat them all (it
        can lie outside the search space: a split refitted from another size)."""
        timed = [trial for trial in (*self.trials, self.untuned) if trial.tflops is not None]
        return max(timed, key=lambda trial: trial.tflops or 0.0) if timed else None


def search_space(
    backend: Backend, variant: str, shape: Shape, itemsize: int, op: str = "mm"
) -> list[warp.WarpConfig]:
    """The candidates of ``variant`` that this device can run, with K splits for
    outputs too small to fill it."""
    spec = backend.variant_spec(variant, op)
    units = backend.device.compute_units or 0
    small = warp.shape_class(*output_size(op, shape), units) == "small"
    configs = []
    for config in warp.candidates(spec.layout):
        if backend.tile_problem(variant, config.BM, itemsize, op, config):
            continue
        for slices in SPLITS if small else (1,):
            if slices == 1 or shape.K // slices >= warp.MIN_K_SLICE:
                configs.append(config.with_slices(slices))
    return configs


@dataclasses.dataclass(frozen=True)
class _Product:
    """One product the tuner times: the operation, its operands and their reference."""

    op: str
    shape: Shape
    A: np.ndarray
    B: np.ndarray
    reference: Reference

    @property
    def output(self) -> tuple[int, int]:
        return output_size(self.op, self.shape)


def tune(
    backend: Backend,
    variants: Iterable[str],
    shapes: Iterable[Shape],
    dtype: np.dtype,
    *,
    ops: Iterable[str] = ("mm",),
    seed: int = 0,
    samples: int = 5,
    progress: Callable[[str], None] = print,
    path: Path | None = None,
) -> list[TuneResult]:
    """Time every candidate of every variant at every shape, for each operation of
    ``ops`` that the variant has (rmm: at shapes with even M and N); cache the best
    of each."""
    results = []
    variants = list(variants)
    if backend.choices is None:  # the untuned choice is the cached one, as in a run
        attach(backend)
    for shape in shapes:
        A, B = make_operands(shape, seed=seed, dtype=dtype)
        for op in ops:
            problem = operation(op).shape_problem(shape.M, shape.N)
            if problem:
                progress(f"{shape}: {op} skipped ({problem})")
                continue
            product = _Product(op, shape, A, B, Reference.of(A, B, op))
            runnable = backend.runnable_variants(op, A.dtype)
            for variant in (v for v in variants if v in runnable):
                result = _search(backend, product, variant, samples, progress)
                results.append(result)
                if result.best is not None:
                    _remember(backend, product, result, path)
    return results


def _search(
    backend: Backend,
    product: _Product,
    variant: str,
    samples: int,
    progress: Callable[[str], None],
) -> TuneResult:
    """Time the untuned choice, then every candidate, of one variant for one product."""
    shape_class = warp.shape_class(*product.output, backend.device.compute_units or 0)
    untuned = _time(backend, product, variant, None, samples)
    space = search_space(backend, variant, product.shape, product.A.itemsize, product.op)
    progress(f"{product.shape} ({shape_class}) {product.op} {variant}: {len(space)} candidates")
    trials = []
    started = time.perf_counter()
    for number, config in enumerate(space, 1):
        trial = _time(backend, product, variant, config, samples)
        trials.append(trial)
        # Three significant digits: a CPU's candidates are GFLOP/s, not 0.00 TFLOP/s.
        speed = f"{trial.tflops * 1000:.3g} GFLOP/s" if trial.tflops else trial.status
        progress(f"  [{number}/{len(space)}] {config.label}: {speed}")
    seconds = round(time.perf_counter() - started, 1)
    return TuneResult(variant, product.op, product.shape, shape_class, trials, untuned, seconds)


def _remember(backend: Backend, product: _Product, result: TuneResult, path: Path | None) -> None:
    """Cache the best of ``result``, with the blocks its launch had (see lookup)."""
    best = result.best
    assert best is not None and best.tflops is not None
    key = entry_key(
        backend.name,
        backend.device.name,
        result.variant,
        product.op,
        product.A.dtype.name,
        result.shape_class,
    )
    entry = {
        "params": best.config.to_dict(),
        "blocks": warp.output_tiles(best.config, *product.output) * best.config.slices,
        "tflops": float(f"{best.tflops:.4g}"),  # 4 significant digits, however small
        "shape": str(product.shape),
        "tuned_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seconds": result.seconds,
        "build": current_build(backend, result.variant, product.op),
    }
    update_entries({key: entry}, path)


def _time(
    backend: Backend,
    product: _Product,
    variant: str,
    config: warp.WarpConfig | None,
    samples: int,
) -> Trial:
    params = None if config is None else config.to_dict()
    try:
        measured = backend.measure(
            product.A,
            product.B,
            variant,
            op=product.op,
            params=params,
            warmup=1,
            samples=samples,
            min_samples=samples,
        )
    except Exception as error:  # a candidate that fails to build or launch is skipped
        return Trial(config or warp.WarpConfig(0, 0, 0, 0, 0, 0, 0), None, str(error)[:200])
    chosen = config or warp.WarpConfig.from_dict(measured.params or {})
    if not all(
        check(out, product.reference).equal for out in (measured.result, measured.last_result)
    ):
        return Trial(chosen, None, "wrong")
    seconds = statistics.median(measured.kernel_s)
    return Trial(chosen, flops(product.op, product.shape) / seconds / 1e12, "ok")
