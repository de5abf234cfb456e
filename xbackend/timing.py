"""Timing samples: their statistics, and the policy that says when to stop taking them.

``Stats`` summarises samples robustly (median and quartiles) and says how far to
trust the median: the relative noise (standard deviation over the mean, as
nvbench reports it) and a bootstrap 95% interval of the median. ``Sampling`` is
how a point is measured (how many samples, to which noise, in which cache state,
from which host memory); ``stop_reason`` is its stopping rule, shared by every
backend through ``Backend.measure``.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence

import numpy as np

# Resamples of a bootstrap interval, and the seed that makes the interval reproducible.
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20261122
CONFIDENCE = 0.95


def bootstrap_median_interval(samples: Sequence[float]) -> tuple[float, float]:
    """A percentile-bootstrap 95% interval of the median of ``samples``."""
    values = np.asarray(samples, dtype=np.float64)
    if values.size < 2:
        return float(values[0]), float(values[0])
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    picks = rng.integers(0, values.size, size=(BOOTSTRAP_RESAMPLES, values.size))
    medians = np.median(values[picks], axis=1)
    tail = (1.0 - CONFIDENCE) / 2
    low, high = np.quantile(medians, [tail, 1.0 - tail])
    return float(low), float(high)


def unmarked(samples: Sequence[float], marks: Sequence[str]) -> list[float]:
    """The samples whose mark is "" (no marks at all: every sample): those the statistics
    and the stopping rule are made of (``backends/sampler.py`` marks the others)."""
    if not marks:
        return list(samples)
    # Not strict: a results file whose marks do not match its samples (damaged) still
    # reads, as far as the two go together.
    return [value for value, mark in zip(samples, marks, strict=False) if not mark]


def relative_noise(samples: Sequence[float]) -> float:
    """Standard deviation over the mean (0 for fewer than two samples)."""
    if len(samples) < 2:
        return 0.0
    mean = statistics.fmean(samples)
    return statistics.stdev(samples) / mean if mean > 0 else math.inf


@dataclasses.dataclass(frozen=True)
class Stats:
    """Seconds: the median and quartiles (robust to the odd slow sample), min, max, mean,
    the standard deviation, the relative noise and a 95% interval of the median."""

    n: int
    median: float
    q1: float
    q3: float
    min: float
    max: float
    mean: float
    std: float = 0.0
    noise: float = 0.0  # std / mean
    ci_low: float = math.nan  # bootstrap 95% interval of the median
    ci_high: float = math.nan

    @classmethod
    def of(cls, samples_s: Sequence[float]) -> Stats:
        if not samples_s:
            raise ValueError("no samples")
        ordered = sorted(samples_s)
        if len(ordered) > 1:
            q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
        else:
            q1 = q3 = ordered[0]
        low, high = bootstrap_median_interval(ordered)
        return cls(
            n=len(ordered),
            median=statistics.median(ordered),
            q1=q1,
            q3=q3,
            min=ordered[0],
            max=ordered[-1],
            mean=statistics.fmean(ordered),
            std=statistics.stdev(ordered) if len(ordered) > 1 else 0.0,
            noise=relative_noise(ordered),
            ci_low=low,
            ci_high=high,
        )

    @property
    def spread(self) -> float:
        """Interquartile range relative to the median."""
        return (self.q3 - self.q1) / self.median if self.median > 0 else 0.0

    def to_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


# -- how a point is sampled ------------------------------------------------------------------

CACHE_MODES = {
    "warm": "each sample uploads the inputs first, so what of them fits is in the cache "
    "(what xbackend always did)",
    "cold": "the last-level cache is flushed before each sample, outside the timed window",
    "hot": "each timed kernel follows an untimed run on the same inputs",
}
HOST_MEMORY = {
    "pageable": "the inputs and the output live in ordinary (pageable) host memory",
    "pinned": "page-locked host memory, copied by DMA without staging",
}
STOP_REASONS = {
    "noise": "the relative noise fell under --max-noise",
    "stable": "the noise settled above --max-noise: more samples would not lower it",
    "timeout": "sampling reached --timeout",
    "max-samples": "the samples reached --samples",
}


@dataclasses.dataclass(frozen=True)
class Sampling:
    """How one point is measured, and when its sampling stops (see ``stop_reason``)."""

    warmup: int = 1  # untimed runs after the first, checked one
    min_samples: int = 10
    max_samples: int = 100
    max_noise: float = 0.01  # relative noise (std / mean) to stop at
    min_time_s: float = 0.0  # kernel time to accumulate before stopping on noise
    timeout_s: float = 10.0  # wall time of the sampling, transfers included
    noise_of: str = "kernel"  # "kernel", or "both": the end-to-end time's noise too
    cache: str = "warm"  # see CACHE_MODES
    host_memory: str = "pageable"  # see HOST_MEMORY
    short_kernel_s: float = 20e-6  # under this, a sample is a batch of launches
    batch_target_s: float = 200e-6  # ... long enough to take this long
    max_launches: int = 1000

    def __post_init__(self) -> None:
        if self.cache not in CACHE_MODES:
            raise ValueError(f"cache mode {self.cache!r}: expected one of {', '.join(CACHE_MODES)}")
        if self.host_memory not in HOST_MEMORY:
            raise ValueError(f"host memory {self.host_memory!r}: expected pageable or pinned")
        if self.noise_of not in ("kernel", "both"):
            raise ValueError(f"noise of {self.noise_of!r}: expected kernel or both")
        if min(self.warmup, self.min_samples, self.max_samples) < 0:
            raise ValueError("sample counts cannot be negative")

    def launches_for(self, kernel_s: float) -> int:
        """Launches per sample for a kernel of ``kernel_s``: one, unless it is short.

        A cold sample is always one launch: every launch of a batch after the first
        would find the cache its predecessor warmed."""
        if kernel_s >= self.short_kernel_s or self.max_launches <= 1 or self.cache == "cold":
            return 1
        wanted = math.ceil(self.batch_target_s / max(kernel_s, 1e-9) - 1e-9)
        return max(1, min(self.max_launches, wanted))

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


# The noise has settled when, over the last ``min_samples`` samples, it moved by
# less than this share of itself.
SETTLED = 0.1


def stop_reason(
    sampling: Sampling,
    kernel_s: Sequence[float],
    end_to_end_s: Sequence[float],
    elapsed_s: float,
    noise_history: Sequence[float] = (),
) -> str | None:
    """Why sampling stops now, or None to take another sample.

    ``kernel_s`` and ``end_to_end_s`` are the samples kept so far (those taken
    while the device throttled are left out by the caller), ``elapsed_s`` the wall
    time since sampling began, ``noise_history`` the relative noise after each
    sample kept. ``min_time_s`` counts kernel time only, never transfers.
    """
    n = len(kernel_s)
    if n >= sampling.max_samples:
        return "max-samples"
    if elapsed_s >= sampling.timeout_s and n >= 1:
        return "timeout"
    if n < max(sampling.min_samples, 2) or math.fsum(kernel_s) < sampling.min_time_s:
        return None
    noise = relative_noise(kernel_s)
    if sampling.noise_of == "both":
        noise = max(noise, relative_noise(end_to_end_s))
    if noise <= sampling.max_noise:
        return "noise"
    window = max(sampling.min_samples, 2)
    if n >= 2 * window and len(noise_history) > window:
        before = noise_history[-1 - window]
        if abs(noise - before) <= SETTLED * noise:
            return "stable"
    return None


def format_seconds(seconds: float) -> str:
    """A duration with a unit that keeps three significant digits readable."""
    if seconds != seconds:  # NaN
        return "—"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"
