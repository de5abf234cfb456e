"""Two runs compared point by point: is B faster than A, slower, the same, or can one not
tell? The statistics and the matching behind ``xbackend diff``.

Points are matched by configuration and size (:attr:`PointRecord.key`: label, device,
operation, variant, tile, data type, batch, M, K, N; never the run). For each point
measured and trusted in both runs, the ratio of medians B/A of the raw samples (the
kernel time's, or the end-to-end time's) gets a percentile-bootstrap 95% interval:
each run's samples are resampled apart (they are independent measurements), the
ratio of the two medians taken each time, and the interval read from the 2.5% and
97.5% quantiles of those ratios. The random numbers are seeded, so the same files
give the same verdicts. With a minimum effect ``threshold`` (0.02: 2%):

* SLOWER: the whole interval lies above 1 + threshold;
* FASTER: the whole interval lies below 1 − threshold;
* SAME: the whole interval lies within [1 − threshold, 1 + threshold];
* UNCERTAIN: anything else (the interval straddles a bound: more samples, or a
  quieter machine, would tell).

A point in one run only, not measured (skipped, failed) or not trusted (timed
faster than the device's peak) in either, or without raw samples, gets no verdict:
it is listed as such. Wrong results are compared (their time is a time) with a note.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

import numpy as np

from xbackend.results import PointKey, PointRecord, RunHeader
from xbackend.tables import CORE_VARIANTS
from xbackend.timing import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, CONFIDENCE

# The smallest change a verdict claims. Two runs of the same plan on an H100 differ by
# up to 10% for kernels of 2-3 µs and by 2-6% up to about 10 µs, with tight intervals
# within each run (docs/measurement.md): a change between runs that no run's samples
# show. 5% keeps such A/A pairs nearly free of verdicts; raise it for tiny kernels.
DEFAULT_THRESHOLD = 0.05
FASTER, SLOWER, SAME, UNCERTAIN = "FASTER", "SLOWER", "SAME", "UNCERTAIN"
VERDICTS = (FASTER, SLOWER, SAME, UNCERTAIN)
# What a point without a verdict is listed as.
ONLY_A, ONLY_B = "only in A", "only in B"
NOT_MEASURED, UNTRUSTED, NO_SAMPLES = "not measured", "untrusted", "no samples"
LISTED = (ONLY_A, ONLY_B, NOT_MEASURED, UNTRUSTED, NO_SAMPLES)
# Which verdicts make ``--fail-on`` exit non-zero.
FAIL_ON = {"slower": (SLOWER,), "faster": (FASTER,), "changed": (FASTER, SLOWER)}
TIMES = ("kernel", "end-to-end")


class Interval(NamedTuple):
    """The ratio of medians B/A and its bootstrap interval."""

    ratio: float
    low: float
    high: float


def ratio_interval(
    a_s: Sequence[float],
    b_s: Sequence[float],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    confidence: float = CONFIDENCE,
) -> Interval:
    """median(b_s) / median(a_s), with a percentile-bootstrap interval (``confidence``).

    The two sets of samples are resampled independently, ``resamples`` times each,
    from a generator seeded with ``seed``: the same samples give the same interval.
    """
    a = np.asarray(a_s, dtype=np.float64)
    b = np.asarray(b_s, dtype=np.float64)
    if a.size == 0 or b.size == 0:
        raise ValueError("a ratio of medians needs samples on both sides")
    rng = np.random.default_rng(seed)
    medians_a = np.median(a[rng.integers(0, a.size, size=(resamples, a.size))], axis=1)
    medians_b = np.median(b[rng.integers(0, b.size, size=(resamples, b.size))], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = medians_b / medians_a
    tail = (1.0 - confidence) / 2
    low, high = np.quantile(ratios, [tail, 1.0 - tail])
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = float(np.median(b) / np.median(a))
    return Interval(ratio, float(low), float(high))


def verdict(interval: Interval, threshold: float) -> str:
    """FASTER, SLOWER, SAME or UNCERTAIN: where the interval lies against 1 ± threshold."""
    low, high = interval.low, interval.high
    if not (np.isfinite(low) and np.isfinite(high)):
        return UNCERTAIN
    if low > 1.0 + threshold:
        return SLOWER
    if high < 1.0 - threshold:
        return FASTER
    if 1.0 - threshold <= low and high <= 1.0 + threshold:
        return SAME
    return UNCERTAIN


def samples_of(point: PointRecord, time: str = "kernel") -> list[float]:
    """The samples a point's statistics are made of: its kernel or end-to-end times."""
    if time not in TIMES:
        raise ValueError(f"time {time!r}: expected one of {', '.join(TIMES)}")
    if time == "kernel":
        return point.kept_kernel_samples_s
    return point.kept_end_to_end_samples_s


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One point of A against the same point of B: a verdict, or why there is none."""

    key: PointKey
    a: PointRecord | None
    b: PointRecord | None
    verdict: str  # one of VERDICTS, or of LISTED
    interval: Interval | None = None
    a_median_s: float | None = None
    b_median_s: float | None = None
    note: str = ""

    @property
    def judged(self) -> bool:
        """Whether the point has a verdict (FASTER, SLOWER, SAME, UNCERTAIN)."""
        return self.verdict in VERDICTS


def _unjudged(a: PointRecord, b: PointRecord, time: str) -> tuple[str, str] | None:
    """Why two matched points get no verdict (the listing and a note), or None."""
    for side, point in (("A", a), ("B", b)):
        if not point.measured:
            return NOT_MEASURED, f"{point.status} in {side}"
    for side, point in (("A", a), ("B", b)):
        if not point.trusted:
            return UNTRUSTED, f"{', '.join(point.flags)} in {side}"
    for side, point in (("A", a), ("B", b)):
        if not samples_of(point, time):
            return NO_SAMPLES, f"no raw {time} samples in {side}"
    return None


def compare_pair(a: PointRecord, b: PointRecord, threshold: float, time: str) -> Comparison:
    """The comparison of one point measured in both runs."""
    unjudged = _unjudged(a, b, time)
    if unjudged is not None:
        return Comparison(a.key, a, b, unjudged[0], note=unjudged[1])
    a_s, b_s = samples_of(a, time), samples_of(b, time)
    interval = ratio_interval(a_s, b_s)
    found = verdict(interval, threshold)
    notes = [f"wrong result in {side}" for side, p in (("A", a), ("B", b)) if p.status != "ok"]
    if min(len(a_s), len(b_s)) < 2:
        found = UNCERTAIN  # one sample tells nothing of the noise
        notes.append("a single sample")
    return Comparison(
        a.key,
        a,
        b,
        found,
        interval,
        float(np.median(a_s)),
        float(np.median(b_s)),
        "; ".join(notes),
    )


def _match_key(point: PointRecord, any_device: bool) -> PointKey:
    return point.key._replace(device="") if any_device else point.key


def compare_points(
    a_points: Iterable[PointRecord],
    b_points: Iterable[PointRecord],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    time: str = "kernel",
    any_device: bool = False,
) -> list[Comparison]:
    """Every point of A and B, matched by configuration and size, each with its verdict.

    A point recorded more than once in one run counts as last recorded. With
    ``any_device``, points are matched by backend label whatever their device (two
    machines' ``cuda`` lines). Sorted by configuration, then by size.
    """
    if not threshold >= 0:
        raise ValueError(f"threshold {threshold}: expected a share of 0 or more")
    a_by = {_match_key(p, any_device): p for p in a_points}
    b_by = {_match_key(p, any_device): p for p in b_points}
    found = []
    for key in {**a_by, **b_by}:
        a, b = a_by.get(key), b_by.get(key)
        if a is not None and b is not None:
            found.append(compare_pair(a, b, threshold, time))
        elif a is not None:
            found.append(Comparison(a.key, a, None, ONLY_A))
        elif b is not None:
            found.append(Comparison(b.key, None, b, ONLY_B))
    return sorted(found, key=lambda c: _sort(c.key))


def _sort(key: PointKey) -> tuple[object, ...]:
    core = CORE_VARIANTS.index(key.variant) if key.variant in CORE_VARIANTS else len(CORE_VARIANTS)
    configuration = (key.label, key.device, key.op, key.batch, key.dtype, core, key.variant)
    return (*configuration, key.tile or 0, key.M * key.N, key.M, key.K, key.N)


def counts(comparisons: Iterable[Comparison]) -> dict[str, int]:
    """How many comparisons have each verdict and listing, in :data:`VERDICTS` then
    :data:`LISTED` order; those that none has are left out."""
    found: dict[str, int] = {}
    for comparison in comparisons:
        found[comparison.verdict] = found.get(comparison.verdict, 0) + 1
    return {name: found[name] for name in (*VERDICTS, *LISTED) if name in found}


def failing(comparisons: Iterable[Comparison], fail_on: str | None) -> list[Comparison]:
    """The comparisons whose verdict ``--fail-on`` (slower, faster, changed) fails on."""
    if fail_on is None:
        return []
    if fail_on not in FAIL_ON:
        raise ValueError(f"--fail-on {fail_on!r}: expected one of {', '.join(FAIL_ON)}")
    return [c for c in comparisons if c.verdict in FAIL_ON[fail_on]]


# -- the machines ------------------------------------------------------------------------------


def _machines(
    runs: Mapping[str, RunHeader], points: Sequence[PointRecord]
) -> tuple[set[str], dict[str, set[str]]]:
    """The hosts of the runs the points come from, and the device names per label."""
    used = {p.run_id for p in points}
    headers = [run for run_id, run in runs.items() if run_id in used] or list(runs.values())
    hosts = {run.host for run in headers if run.host}
    devices: dict[str, set[str]] = {}
    for run in headers:
        for label, device in run.devices.items():
            name = device.get("name")
            if name:
                devices.setdefault(label, set()).add(str(name))
    for point in points:
        if point.label not in devices:
            devices.setdefault(point.label, set()).add(point.device)
    return hosts, devices


def machine_warning(
    a_runs: Mapping[str, RunHeader],
    a_points: Sequence[PointRecord],
    b_runs: Mapping[str, RunHeader],
    b_points: Sequence[PointRecord],
) -> str | None:
    """One line saying how the machines of A and B differ (hosts, device names), or None."""
    a_hosts, a_devices = _machines(a_runs, a_points)
    b_hosts, b_devices = _machines(b_runs, b_points)
    differences = []
    if a_hosts and b_hosts and a_hosts != b_hosts:
        differences.append(
            f"host {', '.join(sorted(a_hosts))} against {', '.join(sorted(b_hosts))}"
        )
    for label in sorted(set(a_devices) & set(b_devices)):
        if a_devices[label] != b_devices[label]:
            a_names, b_names = sorted(a_devices[label]), sorted(b_devices[label])
            differences.append(f"{label}: {', '.join(a_names)} against {', '.join(b_names)}")
    if not differences:
        return None
    return "A and B ran on different machines (" + "; ".join(differences) + ")"


def cache_warning(a_points: Sequence[PointRecord], b_points: Sequence[PointRecord]) -> str | None:
    """One line where A's points and B's were timed in different cache states, or None."""
    a_modes = sorted({p.cache or "warm" for p in a_points if p.measured})
    b_modes = sorted({p.cache or "warm" for p in b_points if p.measured})
    if not a_modes or not b_modes or a_modes == b_modes:
        return None
    a_text, b_text = "/".join(a_modes), "/".join(b_modes)
    return f"A and B were timed in different cache states ({a_text} in A, {b_text} in B)"


# -- rows --------------------------------------------------------------------------------------

ROW_FIELDS = (
    "label", "device", "op", "variant", "tile", "dtype", "batch", "M", "K", "N",
    "a_median_s", "b_median_s", "ratio", "ratio_low", "ratio_high", "verdict",
    "a_samples", "b_samples", "a_noise", "b_noise", "note",
)  # fmt: skip


def _noise(point: PointRecord | None, time: str) -> float | None:
    """The relative noise the run recorded for the time compared (absent in older files)."""
    if point is None:
        return None
    return ((point.kernel_s if time == "kernel" else point.end_to_end_s) or {}).get("noise")


def row(comparison: Comparison, time: str = "kernel") -> dict[str, object]:
    """A comparison as a flat row of :data:`ROW_FIELDS` (None where there is no value)."""
    key, interval = comparison.key, comparison.interval
    a, b = comparison.a, comparison.b
    return {
        **key._asdict(),
        "a_median_s": comparison.a_median_s,
        "b_median_s": comparison.b_median_s,
        "ratio": None if interval is None else interval.ratio,
        "ratio_low": None if interval is None else interval.low,
        "ratio_high": None if interval is None else interval.high,
        "verdict": comparison.verdict,
        "a_samples": None if a is None else len(samples_of(a, time)),
        "b_samples": None if b is None else len(samples_of(b, time)),
        "a_noise": _noise(a, time),
        "b_noise": _noise(b, time),
        "note": comparison.note,
    }
