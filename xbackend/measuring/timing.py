"""Timing samples: their statistics, and the policy that says when to stop taking them.

``Stats`` summarises samples robustly (median and quartiles) and says how far to
trust the median: the relative noise (standard deviation over the mean, as
nvbench reports it) and the 95% interval of the median that sampling stops on, a
distribution-free one made of two order statistics (:func:`median_interval`): the
interval a record keeps is the one that stopped its sampling. ``Sampling`` is
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

# Resamples of a bootstrap interval, and the seed that makes the interval reproducible
# (the tuner's race, tuning.py; a point's record keeps the order statistics instead).
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20261122
CONFIDENCE = 0.95


def bootstrap_median_interval(samples: Sequence[float]) -> tuple[float, float]:
    """A percentile-bootstrap 95% interval of the median of ``samples``: the tuner's race
    (tuning.py). A point's record keeps :func:`median_interval`, the one it stopped on."""
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
    and the stopping rule are made of (``measuring/sampler.py`` marks the others)."""
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


def median_ranks(n: int, confidence: float = CONFIDENCE) -> tuple[int, int]:
    """The ranks (from 1) of the order statistics that bound a distribution-free interval
    of the median of ``n`` samples: the k-th smallest and the k-th largest, k the largest
    rank for which P(Binomial(n, 1/2) < k) is at most (1 - confidence)/2. Below six
    samples no rank gives 95%: the interval is the range, whose coverage is 1 - 2^(1-n)
    (94% at five)."""
    tail, k, below = (1.0 - confidence) / 2, 1, 0.0
    if n > 1000:  # the normal approximation, exact enough there
        k = max(1, math.floor(n / 2 - 1.959964 * math.sqrt(n) / 2))
        return k, n - k + 1
    while True:
        below += math.comb(n, k - 1) / 2.0**n  # P(X <= k - 1) = P(X < k)
        if below > tail or 2 * k > n:
            break
        k += 1
    k = max(1, k - 1)
    return k, n - k + 1


def median_interval(samples: Sequence[float]) -> tuple[float, float]:
    """The 95% interval of the median of ``samples``: the order statistics at the ranks
    :func:`median_ranks` gives (one sample: that sample, twice). Sampling stops on it
    (:func:`interval_share`), ``noisy`` is flagged by it, and a record keeps it
    (``ci_low``, ``ci_high``)."""
    if not samples:
        raise ValueError("no samples")
    return _interval_of_sorted(sorted(samples))


def _interval_of_sorted(ordered: Sequence[float]) -> tuple[float, float]:
    low, high = median_ranks(len(ordered))
    return ordered[low - 1], ordered[high - 1]


def interval_share(samples: Sequence[float]) -> float:
    """The half width of the 95% interval of the median (:func:`median_interval`) as a
    share of the median: how far the median could be off, the precision a point stops
    at. Infinite for fewer than two samples."""
    if len(samples) < 2:
        return math.inf
    ordered = sorted(samples)
    low, high = _interval_of_sorted(ordered)
    middle = statistics.median(ordered)
    if middle <= 0:
        return math.inf
    return (high - low) / 2 / middle


@dataclasses.dataclass(frozen=True)
class Stats:
    """Seconds: the median and quartiles (robust to the odd slow sample), min, max, mean,
    the standard deviation, the relative noise and the 95% interval of the median that
    sampling stops on (:func:`median_interval`)."""

    n: int
    median: float
    q1: float
    q3: float
    min: float
    max: float
    mean: float
    std: float = 0.0
    noise: float = 0.0  # std / mean
    # The 95% interval of the median: order statistics (median_interval); in files from
    # before it, a percentile bootstrap of the median.
    ci_low: float = math.nan
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
        low, high = _interval_of_sorted(ordered)
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


# A point is noisy where the 95% interval of its median is wider than ± this share of it:
# two runs' points that wide give a ratio interval of about ±3.5%, no longer within diff's
# default ±5% (diff.DEFAULT_THRESHOLD) once the ratio itself moves at all. It is what the
# verdicts need, not the precision sampling aims at (--max-noise, 1%): with that, 187 of
# 190 points of a loaded 2-core run were marked and the mark said nothing (issue 53).
NOISY_SHARE = 0.025


def noisy(samples: Sequence[float]) -> bool:
    """Whether the 95% interval of the median of ``samples`` is wider than ± ``NOISY_SHARE``
    of it (one sample: no interval, noisy)."""
    return interval_share(samples) > NOISY_SHARE


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
# The fields of ``Sampling`` that change what a time means (the cache's state, the host
# memory copied from); every other field says how thoroughly the same time is sampled.
CONDITIONS = ("cache", "host_memory")
STOP_REASONS = {
    "interval": "the 95% interval of the median lay within ± --max-noise of it",
    "capped": "the interval was still wider than ± --max-noise, and at the rate it "
    "narrowed it would not reach it within --timeout (flagged noisy where it is wider than "
    "the verdicts need: timing.NOISY_SHARE)",
    "timeout": "sampling reached --timeout",
    "max-samples": "the samples reached --samples",
    # Reasons of files from before the interval rule (they read as they were).
    "noise": "the relative noise fell under --max-noise",
    "stable": "the noise settled above --max-noise: more samples would not lower it",
}


@dataclasses.dataclass(frozen=True)
class Sampling:
    """How one point is measured, and when its sampling stops (see ``stop_reason``)."""

    warmup: int = 1  # untimed runs after the first, checked one
    min_samples: int = 5
    max_samples: int = 100
    # The precision to stop at: the 95% interval of the median within ± this share of it.
    max_noise: float = 0.01
    min_time_s: float = 0.0  # kernel time to accumulate before stopping on noise
    timeout_s: float = 10.0  # wall time of the sampling, transfers included
    noise_of: str = "kernel"  # "kernel", or "both": the end-to-end time's noise too
    cache: str = "warm"  # see CACHE_MODES
    host_memory: str = "pageable"  # see HOST_MEMORY
    short_kernel_s: float = 20e-6  # under this, a sample is a batch of launches
    batch_target_s: float = 200e-6  # ... long enough to take this long
    max_launches: int = 1000
    # On a CPU device (the CPU backend, OpenCL on a CPU) the host's scheduler, not a
    # clock's resolution, is what one call is at the mercy of: its timer ticks, a BLAS
    # thread woken late. There a call under ``cpu_short_kernel_s`` is batched to take
    # ``cpu_batch_target_s`` (issue 37: docs/notebook/measurement.md, "CPU lines that settle").
    cpu_short_kernel_s: float = 1e-3
    cpu_batch_target_s: float = 2e-3
    # After the samples, launches back to back for this long while the device's energy
    # counter (NVML) steps at both ends: joules per product (sampler.measure_energy). 0: off.
    energy_s: float = 0.0

    def __post_init__(self) -> None:
        if self.cache not in CACHE_MODES:
            raise ValueError(f"cache mode {self.cache!r}: expected one of {', '.join(CACHE_MODES)}")
        if self.host_memory not in HOST_MEMORY:
            raise ValueError(f"host memory {self.host_memory!r}: expected pageable or pinned")
        if self.noise_of not in ("kernel", "both"):
            raise ValueError(f"noise of {self.noise_of!r}: expected kernel or both")
        if min(self.warmup, self.min_samples, self.max_samples) < 0:
            raise ValueError("sample counts cannot be negative")

    def launches_for(self, kernel_s: float, on_cpu: bool = False) -> int:
        """Launches per sample for a kernel of ``kernel_s``: one, unless it is short
        (``on_cpu``: on a CPU device, shorter than ``cpu_short_kernel_s``).

        A cold sample is always one launch: every launch of a batch after the first
        would find the cache its predecessor warmed; ``short_kernel_s`` 0 turns batches
        off everywhere."""
        short, target = self.short_kernel_s, self.batch_target_s
        if on_cpu and short > 0:
            short, target = (
                max(short, self.cpu_short_kernel_s),
                max(target, self.cpu_batch_target_s),
            )
        if kernel_s >= short or self.max_launches <= 1 or self.cache == "cold":
            return 1
        wanted = math.ceil(target / max(kernel_s, 1e-9) - 1e-9)
        return max(1, min(self.max_launches, wanted))

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


# Named samplings, as pyperf's --fast and --rigorous: a quick look (a few samples, ±5%),
# and a run to publish (more samples, ±0.5%, a second of kernel time at least).
PRESETS = {
    "fast": Sampling(min_samples=3, max_samples=20, max_noise=0.05, timeout_s=2.0),
    "rigorous": Sampling(min_samples=20, max_samples=1000, max_noise=0.005, min_time_s=1.0,
                         timeout_s=60.0),
}  # fmt: skip


# Past this many samples the rule looks again only every 2% more of them: sorting every
# sample after each one would cost more than the samples of a fast kernel.
_EVERY_SAMPLE_UNTIL = 200
# Below this many samples the interval is the range, or leaves out one sample a side: one
# stray sample (a timer tick, a thread woken late) makes it wide. A point is not capped
# before it has these where they are cheap, within 2% of its timeout (issue 37: 5
# samples of NumPy's line at 320² read 0.22 to 14 ms, capped, where 100 would have taken
# 50 ms); a slow point still stops at five, as before.
_CAP_AFTER = 10
_CHEAP_SHARE = 0.02


def stop_reason(
    sampling: Sampling,
    kernel_s: Sequence[float],
    end_to_end_s: Sequence[float],
    elapsed_s: float,
) -> str | None:
    """Why sampling stops now, or None to take another sample.

    ``kernel_s`` and ``end_to_end_s`` are the samples kept so far (those taken while
    the device throttled are left out by the caller), ``elapsed_s`` the wall time since
    sampling began. Once ``min_samples`` are taken (and ``min_time_s`` of kernel time),
    a point stops when the 95% interval of its median lies within ± ``max_noise`` of it
    (:func:`interval_share`; of the end-to-end time's too with ``noise_of="both"``): a
    slow, steady kernel after a few samples. A noisy one stops when, the interval
    narrowing as one over the root of the samples, reaching the target would take past
    ``timeout_s``: its time goes where it can still change the number.
    """
    n = len(kernel_s)
    if n >= sampling.max_samples:
        return "max-samples"
    if elapsed_s >= sampling.timeout_s and n >= 1:
        return "timeout"
    if n < max(sampling.min_samples, 2) or math.fsum(kernel_s) < sampling.min_time_s:
        return None
    if n > _EVERY_SAMPLE_UNTIL and n % max(1, n // 50):
        return None
    share = interval_share(kernel_s)
    if sampling.noise_of == "both":
        share = max(share, interval_share(end_to_end_s))
    if share <= sampling.max_noise:
        return "interval"
    per_sample_s, left_s = elapsed_s / n, sampling.timeout_s - elapsed_s
    if n < _CAP_AFTER and (_CAP_AFTER - n) * per_sample_s <= _CHEAP_SHARE * sampling.timeout_s:
        return None  # cheap enough to see past a stray sample first
    needed = n * (share / sampling.max_noise) ** 2
    if (needed - n) * per_sample_s > left_s:
        return "capped"
    return None


def rate_text(value: float, unit: str) -> str:
    """``value`` per second in the prefix that reads best: 470 GFLOP/s, 3.1 TB/s."""
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}{unit}/s"
    return f"{value:.3g} {unit}/s"


def format_seconds(seconds: float) -> str:
    """A duration with a unit that keeps three significant digits readable."""
    if seconds != seconds:  # NaN
        return "—"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"
