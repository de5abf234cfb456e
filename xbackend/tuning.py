"""``xbackend tune``: search the mm_warp parameters on this device and cache the best.

Every candidate is verified against the float64 check before its time counts; a
wrong one is reported and never chosen. The best per (backend, device, variant,
operation, dtype, shape class) goes to one JSON file, ``$XDG_CACHE_HOME/xbackend/tuned.json``
(``~/.cache`` by default) or the path in ``XBACKEND_TUNE_CACHE``. The tuned variants
read it for every product (``Backend._warp_config``); without an entry they use
the size-aware default of ``backends/warp.py``.

The file is edited by hand and shared between versions, so nothing in it is trusted:
an entry that is malformed, or whose parameters the launch planner would refuse, is
ignored with a ``TuneCacheWarning`` naming the file (once per file and process), and
its products use the default.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import time
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from xbackend.backends import warp
from xbackend.backends.base import user_cache_dir
from xbackend.problems import Reference, Shape, check, flops, make_operands, output_size
from xbackend.safeio import atomic_write

if TYPE_CHECKING:
    from xbackend.backends.base import Backend

CACHE_ENV = "XBACKEND_TUNE_CACHE"
FORMAT = 2  # 2: keys name the operation; entries count their launch's blocks
SPLITS = (1, 2, 3, 4, 6)  # K ranges tried where the output is small
OPS = ("mm", "rmm")  # the operations tuned: bmm takes no cached choice


def cache_path() -> Path:
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    return user_cache_dir() / "tuned.json"


class TuneCacheWarning(UserWarning):
    """Part of the tune cache was ignored: the message names the file and says why."""


_warned: set[tuple[str, str]] = set()  # (file, what): each warning once per process
_LISTED = 20  # bad entries named in one warning


def _warn_once(path: Path, what: str, message: str) -> None:
    marker = (os.path.abspath(path), what)
    if marker not in _warned:
        _warned.add(marker)
        warnings.warn(message, TuneCacheWarning, stacklevel=3)


def _shorten(text: object, limit: int = 120) -> str:
    text = str(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def entry_problem(entry: Any) -> str | None:
    """Why a cache entry cannot be used, or None: its ``params`` must be a configuration
    the launch planner accepts on any device (``WarpConfig.problem``; the device's own
    limits are checked at lookup), ``blocks`` a count, ``tflops`` and ``shape`` what
    ``tune`` writes (``tune --show`` prints them)."""
    if not isinstance(entry, dict):
        return "not an object"
    params = entry.get("params")
    if not isinstance(params, dict):
        return "no params object"
    try:
        config = warp.WarpConfig.from_dict(params)
    except (TypeError, ValueError) as error:
        return str(error)
    problem = config.problem()
    if problem:
        return problem
    if config.slices > warp.MAX_SLICES:
        return f"{config.slices} K ranges; at most {warp.MAX_SLICES}"
    blocks = entry.get("blocks", 0)
    if isinstance(blocks, bool) or not isinstance(blocks, int) or blocks < 0:
        return f"blocks must be a count, not {blocks!r}"
    tflops = entry.get("tflops")
    if tflops is not None and (isinstance(tflops, bool) or not isinstance(tflops, int | float)):
        return f"tflops must be a number, not {tflops!r}"
    if not isinstance(entry.get("shape", ""), str):
        return f"shape must be text, not {entry['shape']!r}"
    return None


# The shape class whose choice serves a class that was not tuned (see lookup).
NEIGHBOUR = {"medium": "large", "large": "medium"}


def _key(backend: str, device: str, variant: str, op: str, dtype: str, shape_class: str) -> str:
    return "|".join((backend, device, variant, op, dtype, shape_class))


def load_entries(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """The well-formed cached choices (see ``entry_problem``).

    A missing file, or one of another format (another version's), is an empty cache.
    An unreadable file, one that is not JSON, and every malformed entry are ignored
    with a ``TuneCacheWarning`` naming the file.
    """
    path = path or cache_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as error:
        _warn_once(path, "file", f"{path}: cannot read the tune cache ({error}); ignored")
        return {}
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as error:
        _warn_once(path, "file", f"{path}: the tune cache is not JSON ({_shorten(error)}); ignored")
        return {}
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return {}
    entries = data.get("entries", {})
    if not isinstance(entries, dict):
        _warn_once(path, "file", f"{path}: 'entries' is not an object; the cache is ignored")
        return {}
    good, bad = {}, {}
    for key, entry in entries.items():
        problem = entry_problem(entry)
        if problem is None:
            good[key] = entry
        else:
            bad[key] = problem
    if bad:
        listed = [f"{_shorten(key, 80)!r}: {_shorten(problem)}" for key, problem in bad.items()]
        more = f"; and {len(bad) - _LISTED} more" if len(bad) > _LISTED else ""
        _warn_once(
            path,
            "entries",
            f"{path}: ignoring {len(bad)} malformed tune cache "
            f"{'entry' if len(bad) == 1 else 'entries'} ({'; '.join(listed[:_LISTED])}{more}); "
            "their products use the default parameters (run xbackend tune again to replace them)",
        )
    return good


def save_entries(entries: dict[str, dict[str, Any]], path: Path | None = None) -> Path:
    """Write the cache whole, through a temporary file of its own, so a reader never sees
    half and writers racing each other never share one (the last rename wins)."""
    path = path or cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"format": FORMAT, "entries": entries}, indent=1, sort_keys=True)
    atomic_write(path, text + "\n")
    return path


def lookup(
    backend: Backend,
    variant: str,
    dtype: np.dtype,
    shape_class: str,
    op: str = "mm",
    size: tuple[int, int, int] | None = None,
    check: Callable[[warp.WarpConfig], str | None] | None = None,
) -> warp.WarpConfig | None:
    """The cached configuration for a product on ``backend``'s device, or None.

    A class with no entry takes its neighbour's where both fill the GPU without a
    split (medium and large), so that tuning one large size serves both; an rmm
    with neither takes mm's choice, the product of its pair sums being an mm.
    With ``size`` (the output's M and N, and K), a split choice is refitted to that
    size: as many K ranges as give the blocks its tuned launch had (see
    ``warp.refit_slices``), so a small output gets a deeper split than the tuned one.
    ``check`` says why a configuration cannot run on the device (``Backend.tile_problem``):
    an entry it refuses is ignored with a warning, as if not there.
    """
    path = cache_path()
    entries = load_entries(path)
    dtype_name = np.dtype(dtype).name
    classes = list(filter(None, (shape_class, NEIGHBOUR.get(shape_class))))
    wanted = [(op, c) for c in classes] + ([("mm", c) for c in classes] if op != "mm" else [])
    for entry_op, entry_class in wanted:
        key = _key(backend.name, backend.device.name, variant, entry_op, dtype_name, entry_class)
        entry = entries.get(key)
        if entry is None:
            continue
        config = warp.WarpConfig.from_dict(entry["params"])  # checked by load_entries
        blocks = entry.get("blocks", 0)
        if size is not None and config.slices > 1 and blocks > 0:
            config = warp.refit_slices(config, blocks, *size)
        problem = check(config) if check else None
        if problem:
            _warn_once(path, key, f"{path}: ignoring the entry {key!r}: {_shorten(problem)}")
            continue
        return config
    return None


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
    for shape in shapes:
        A, B = make_operands(shape, seed=seed, dtype=dtype)
        for op in ops:
            if op == "rmm" and (shape.M % 2 or shape.N % 2):
                progress(f"{shape}: rmm skipped (it needs even M and N)")
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
        speed = f"{trial.tflops:.2f} TFLOP/s" if trial.tflops else trial.status
        progress(f"  [{number}/{len(space)}] {config.label}: {speed}")
    seconds = round(time.perf_counter() - started, 1)
    return TuneResult(variant, product.op, product.shape, shape_class, trials, untuned, seconds)


def _remember(backend: Backend, product: _Product, result: TuneResult, path: Path | None) -> None:
    """Cache the best of ``result``, with the blocks its launch had (see lookup)."""
    best = result.best
    assert best is not None and best.tflops is not None
    entries = load_entries(path)
    key = _key(
        backend.name,
        backend.device.name,
        result.variant,
        product.op,
        product.A.dtype.name,
        result.shape_class,
    )
    entries[key] = {
        "params": best.config.to_dict(),
        "blocks": warp.output_tiles(best.config, *product.output) * best.config.slices,
        "tflops": float(f"{best.tflops:.4g}"),  # 4 significant digits, however small
        "shape": str(product.shape),
        "tuned_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seconds": result.seconds,
    }
    save_entries(entries, path)


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
