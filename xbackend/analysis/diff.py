"""Two runs compared point by point: is B faster than A, slower, the same, or can one not
tell? The statistics and the matching behind ``xbackend diff``.

Points are matched by configuration and size (:attr:`PointRecord.key`: label, device,
operation, variant, tile, data type, batch, M, K, N; never the run), whatever the host;
where a run holds the same point from several hosts, host by host (:func:`host_pairs`).
For each point measured and trusted in both runs, the ratio of medians B/A of the raw
samples (the kernel time's, or the end-to-end time's) gets a percentile-bootstrap 95%
interval: each run's samples are resampled apart (they are independent measurements),
the ratio of the two medians taken each time, and the interval read from the 2.5% and
97.5% quantiles of those ratios (each resample's median drawn from its order
statistics, :func:`bootstrap_medians`). The random numbers are seeded, so the same
files give the same verdicts. With a minimum effect ``threshold`` (0.02: 2%):

* SLOWER: the whole interval lies above 1 + threshold;
* FASTER: the whole interval lies below 1 − threshold;
* SAME: the whole interval lies within [1 − threshold, 1 + threshold];
* UNCERTAIN: anything else (the interval straddles a bound: more samples, or a
  quieter machine, would tell).

Every UNCERTAIN says why in its note: the interval reaches past the threshold, the
change lies within the A/A floor of its kind (floors.py, which says where it was
measured), or, on a CPU device (the CPU backend, OpenCL on a CPU), the host differed
between the runs or was contended past the floors' (its load, its speed, the contention
each point measured: ``diff_cpu.py``), and a CPU's time moves with that, whatever the
kernel did, unless the CPU time of one thread's work says the same.

A point in one run only, not measured (skipped, failed) or not trusted (timed
faster than the device's peak) in either, or without raw samples, gets no verdict:
it is listed as such. Wrong results are compared (their time is a time) with a note.
Where both runs read a point's energy (``--energy``), its joules per product are compared
too, by a fixed tolerance: one reading has no interval, and no A/A floor of energy is
measured (``joules.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from xbackend.analysis import joules
from xbackend.analysis.diff_cpu import host_reason, judged
from xbackend.analysis.diff_cpu import load_reason as load_reason  # for diff's callers
from xbackend.analysis.diff_machines import cache_warning as cache_warning  # for diff's callers
from xbackend.analysis.diff_machines import machine_warning as machine_warning
from xbackend.analysis.floors import Floors, measured
from xbackend.analysis.tables import CORE_VARIANTS
from xbackend.measuring.contention import QUIET_STALL
from xbackend.measuring.timing import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, CONFIDENCE
from xbackend.results import PointKey, PointRecord

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
    Each resample's median is drawn as :func:`bootstrap_medians` draws it, exactly as
    the plain bootstrap would give it, in time and memory that do not grow with the
    product of samples and resamples.
    """
    a = np.asarray(a_s, dtype=np.float64)
    b = np.asarray(b_s, dtype=np.float64)
    if a.size == 0 or b.size == 0:
        raise ValueError("a ratio of medians needs samples on both sides")
    rng = np.random.default_rng(seed)
    medians_a = bootstrap_medians(a, resamples, rng)
    medians_b = bootstrap_medians(b, resamples, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = medians_b / medians_a
    tail = (1.0 - confidence) / 2
    low, high = np.quantile(ratios, [tail, 1.0 - tail])
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = float(np.median(b) / np.median(a))
    return Interval(ratio, float(low), float(high))


def bootstrap_medians(samples: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """The medians of ``resamples`` bootstrap resamples of ``samples``, drawn exactly,
    without building the resamples.

    A resample of n draws n indices uniformly. Its j-th smallest value is the sorted
    samples' ceil(n·U₍ⱼ₎)-th, where U₍ⱼ₎, the j-th smallest of n uniforms on (0, 1),
    is Beta(j, n − j + 1); given U₍ⱼ₎ = u, the next one is u + (1 − u)·Beta(1, n − j)
    (the least of the n − j uniforms above u). So the middle value of a resample, or
    the mean of its middle two, is drawn from the very distribution that plain
    resampling gives it: the interval is the percentile bootstrap's, only its random
    numbers differ. It costs a sort and 2 draws per resample: O(n log n + resamples)
    time and O(n + resamples) memory, where plain resampling takes n·resamples of
    both (one point of 100,000 samples: 3.2 GB and 22 s; now megabytes and
    milliseconds).
    """
    ordered: NDArray[np.float64] = np.sort(np.asarray(samples, dtype=np.float64))
    n = ordered.size
    middle = (n + 1) // 2  # the (lower) middle rank, from 1
    lower: NDArray[np.float64] = rng.beta(middle, n - middle + 1, size=resamples)
    picked: NDArray[np.float64] = ordered[_rank(lower, n)]
    if n % 2:
        return picked
    # Beta(1, k) by its inverse distribution function: 1 − V^(1/k), V uniform on (0, 1].
    above = -np.expm1(np.log1p(-rng.random(resamples)) / (n - middle))
    upper = lower + (1.0 - lower) * above
    medians: NDArray[np.float64] = (picked + ordered[_rank(upper, n)]) / 2
    return medians


def _rank(uniforms: NDArray[np.float64], n: int) -> NDArray[np.int64]:
    """The index (from 0) that a uniform draw on (0, 1) picks among n sorted values."""
    ranks: NDArray[np.int64] = np.ceil(uniforms * n).astype(np.int64) - 1
    return np.clip(ranks, 0, n - 1)


def verdict(interval: Interval, threshold: float, floor: float = 0.0) -> str:
    """FASTER, SLOWER, SAME or UNCERTAIN: where the interval lies against 1 ± threshold,
    and against the A/A ``floor``, the change runs of the same plan showed (floors.py).

    A change is claimed only beyond both: SLOWER above 1 + max(threshold, floor), FASTER
    below min(1 - threshold, 1 / (1 + floor)) (the floor is a change either way, as a
    ratio). Sameness is claimed only within 1 ± threshold: a point whose runs differ by
    2× with nothing changed is not the same within 5%, it is UNCERTAIN (floors are
    bounded: floors.BOUND).
    """
    low, high = interval.low, interval.high
    if not (np.isfinite(low) and np.isfinite(high)):
        return UNCERTAIN
    if low > 1.0 + max(threshold, floor):
        return SLOWER
    if high < min(1.0 - threshold, 1.0 / (1.0 + floor)):
        return FASTER
    if 1.0 - threshold <= low and high <= 1.0 + threshold:
        return SAME
    return UNCERTAIN


def uncertain_reason(interval: Interval, threshold: float, floor: float = 0.0) -> str:
    """Why :func:`verdict` says UNCERTAIN for ``interval``, in words."""
    low, high = interval.low, interval.high
    if not (np.isfinite(low) and np.isfinite(high)):
        return "no finite interval"
    if low > 1.0 + threshold or high < 1.0 - threshold:
        return f"a change within the A/A floor ±{floor * 100:.3g}%"
    return f"the interval reaches past 1 ± {threshold * 100:.3g}%"


def _cpu_verdict(
    threshold: float, floor: float
) -> Callable[[list[float], list[float]], tuple[str, str]]:
    """The verdict of two points' CPU times, by the rule of their wall times, and its
    interval in words ("1.49 [1.45–1.52]")."""

    def judge(a_cpu: list[float], b_cpu: list[float]) -> tuple[str, str]:
        cpu = ratio_interval(a_cpu, b_cpu)
        return verdict(cpu, threshold, floor), f"{cpu.ratio:.3g} [{cpu.low:.3g}–{cpu.high:.3g}]"

    return judge


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
    # The hosts compared, "A's / B's" (one name where they are the same), where a side
    # held this point from several hosts; "" otherwise.
    hosts: str = ""
    # The A/A floor the verdict had to clear, beside the threshold (floors.py), and
    # where that floor was measured ("" where it is none).
    floor: float = 0.0
    floor_from: str = ""
    # A CPU device's FASTER or SLOWER taken back: the host's load or speed differed
    # between the runs (:func:`load_reason`, in the note).
    host_differed: bool = False
    # Joules per product in A and B, where both runs read them (``joules.compare``).
    energy: joules.EnergyChange | None = None

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


def compare_pair(
    a: PointRecord, b: PointRecord, threshold: float, time: str, floor: float = 0.0,
    on_cpu: bool = False, stall_limit: float = QUIET_STALL,
) -> Comparison:  # fmt: skip
    """The comparison of one point measured in both runs; a verdict claims no change
    smaller than ``floor``, what runs of the same plan differ by (floors.py), nor one on a
    CPU device (``on_cpu``) whose host differed between the runs or was contended beyond
    ``stall_limit`` (diff_cpu.py), unless the CPU times' verdict is the same."""
    unjudged = _unjudged(a, b, time)
    if unjudged is not None:
        return Comparison(a.key, a, b, unjudged[0], note=unjudged[1])
    a_s, b_s = samples_of(a, time), samples_of(b, time)
    interval = ratio_interval(a_s, b_s)
    found = verdict(interval, threshold, floor)
    notes = [f"wrong result in {side}" for side, p in (("A", a), ("B", b)) if p.status != "ok"]
    single = min(len(a_s), len(b_s)) < 2
    changed = not single and found in (FASTER, SLOWER)
    loaded = host_reason(a, b, stall_limit) if on_cpu and changed else None
    taken_back = False
    if loaded is not None and time != "kernel":  # the CPU time is the kernel's only
        taken_back, loaded = True, f"{loaded}; no CPU time of the end-to-end window"
    elif loaded is not None:
        stands, loaded = judged(found, a, b, loaded, _cpu_verdict(threshold, floor))
        taken_back = not stands
    if single:
        found = UNCERTAIN  # one sample tells nothing of the noise
        notes.append("a single sample")
    elif loaded is not None:
        found = UNCERTAIN if taken_back else found
        notes.append(loaded)
    elif found == UNCERTAIN:
        notes.append(uncertain_reason(interval, threshold, floor))
    return Comparison(
        a.key,
        a,
        b,
        found,
        interval,
        float(np.median(a_s)),
        float(np.median(b_s)),
        "; ".join(notes),
        floor=floor,
        host_differed=taken_back,
    )


def _match_key(point: PointRecord, any_device: bool) -> PointKey:
    return point.key._replace(device="") if any_device else point.key


Pair = tuple[PointRecord | None, PointRecord | None]


def host_pairs(a_points: Sequence[PointRecord], b_points: Sequence[PointRecord]) -> list[Pair]:
    """The points of one configuration and size in A and in B, paired machine by machine.

    One point a side: the two, whatever their hosts (two machines' runs compared). Where
    a side holds the point from several hosts (a host is part of a point's identity),
    each host's point is compared with the same host's on the other side; a side with a
    single point on a host the other lacks is compared with each of the other's; what
    is left is listed as in one run only. A host's point recorded twice counts as last.
    """
    a_by = {p.host: p for p in a_points}
    b_by = {p.host: p for p in b_points}
    if len(a_by) <= 1 and len(b_by) <= 1:
        return [(next(iter(a_by.values()), None), next(iter(b_by.values()), None))]
    common = [host for host in a_by if host in b_by]
    if not common and len(a_by) == 1:
        return [(a_by[next(iter(a_by))], b) for b in b_by.values()]
    if not common and len(b_by) == 1:
        return [(a, b_by[next(iter(b_by))]) for a in a_by.values()]
    pairs: list[Pair] = [(a_by[host], b_by[host]) for host in common]
    pairs += [(a, None) for host, a in a_by.items() if host not in b_by]
    pairs += [(None, b) for host, b in b_by.items() if host not in a_by]
    return pairs


def _hosts(a: PointRecord | None, b: PointRecord | None) -> str:
    """How a comparison names its machines where a side held several: A's host / B's."""
    a_host = "?" if a is None else a.host or "?"
    b_host = "?" if b is None else b.host or "?"
    return a_host if a_host == b_host else f"{a_host} / {b_host}"


def _compared(
    pair: Pair, threshold: float, time: str, several: bool, floors: Floors,
    cpu_devices: frozenset[str], energy_tolerance: float = joules.TOLERANCE,
) -> Comparison:  # fmt: skip
    """One pair's comparison, or its listing as in one run only; named by its hosts
    where either side held the point from ``several`` hosts."""
    a, b = pair
    hosts = _hosts(a, b) if several else ""
    if a is not None and b is not None:
        floor = floors.floor(a) if time == "kernel" else 0.0
        on_cpu = a.clock == "host" or a.device in cpu_devices
        compared = compare_pair(a, b, threshold, time, floor, on_cpu, floors.stall_limit)
        energy = joules.compare(a, b, energy_tolerance)
        return dataclasses.replace(compared, hosts=hosts, floor_from=_floor_from(floors, a, floor),
                                   energy=energy)  # fmt: skip
    if a is not None:
        note = f"B has no point of host {a.host or '?'}" if several else ""
        return Comparison(a.key, a, None, ONLY_A, hosts=hosts, note=note)
    assert b is not None
    note = f"A has no point of host {b.host or '?'}" if several else ""
    return Comparison(b.key, None, b, ONLY_B, hosts=hosts, note=note)


def _floor_from(floors: Floors, point: PointRecord, floor: float) -> str:
    """Where a floor past the threshold came from: its kind, and the pairs it was
    measured on."""
    kind = floors.described(point) if floor else ""
    if not kind:
        return ""
    return f"{kind}, from {floors.how or f'{floors.pairs} A/A pairs'}"


def compare_points(
    a_points: Iterable[PointRecord],
    b_points: Iterable[PointRecord],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    time: str = "kernel",
    any_device: bool = False,
    floors: Floors | None = None,
    cpu_devices: Iterable[str] = (),
    energy_tolerance: float = joules.TOLERANCE,
) -> list[Comparison]:
    """Every point of A and B, matched by configuration and size, each with its verdict.

    Where a side holds a point from several hosts, the hosts are paired as
    :func:`host_pairs` says and each comparison names them (``hosts``). A point recorded
    more than once on one host counts as last recorded. With ``any_device``, points are
    matched by backend label whatever their device (two machines' ``cuda`` lines). A
    kernel time's verdict claims no change under its A/A floor (``floors``: none given,
    no floor), nor, on a CPU (the host's clock, or a device named in ``cpu_devices``),
    one between runs whose host's load differed. Joules, where both runs read them, against
    ``energy_tolerance`` (``joules.compare``). Sorted by configuration, size, hosts.
    """
    if not threshold >= 0:
        raise ValueError(f"threshold {threshold}: expected a share of 0 or more")
    a_by: dict[PointKey, list[PointRecord]] = {}
    b_by: dict[PointKey, list[PointRecord]] = {}
    for point in a_points:
        a_by.setdefault(_match_key(point, any_device), []).append(point)
    for point in b_points:
        b_by.setdefault(_match_key(point, any_device), []).append(point)
    found, cpus = [], frozenset(cpu_devices)
    for key in {**a_by, **b_by}:
        a_list, b_list = a_by.get(key, []), b_by.get(key, [])
        several = max(len({p.host for p in a_list}), len({p.host for p in b_list})) > 1
        for pair in host_pairs(a_list, b_list):
            found.append(_compared(pair, threshold, time, several, floors or Floors(), cpus,
                                   energy_tolerance))  # fmt: skip
    return sorted(found, key=lambda c: (_sort(c.key), c.hosts))


def aa_floors(comparisons: Iterable[Comparison], how: str = "") -> Floors:
    """The floors an A/A pair shows (``floors.measured``): its judged points' changes."""
    return measured(
        ((c.a, c.b) for c in comparisons if c.judged and c.a is not None and c.b is not None),
        how,
    )


def several_hosts(comparisons: Iterable[Comparison]) -> str | None:
    """One line where A or B held a point from several hosts (then compared host by
    host, :func:`host_pairs`), naming each side's hosts; or None."""
    hosts: dict[str, set[str]] = {"A": set(), "B": set()}
    for comparison in comparisons:
        if comparison.hosts:
            for side, point in (("A", comparison.a), ("B", comparison.b)):
                if point is not None:
                    hosts[side].add(point.host or "?")
    if not hosts["A"] and not hosts["B"]:
        return None
    named = "; ".join(f"{side}: {', '.join(sorted(found))}" for side, found in hosts.items())
    return (
        f"the same points come from several hosts ({named}): compared host by host, "
        "each row naming its hosts (A's / B's); --a-host, --b-host keep one host a side"
    )


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


# -- rows --------------------------------------------------------------------------------------

ROW_FIELDS = (
    "label", "device", "op", "variant", "tile", "dtype", "batch", "M", "K", "N",
    "a_median_s", "b_median_s", "ratio", "ratio_low", "ratio_high", "verdict",
    "a_samples", "b_samples", "a_noise", "b_noise", "floor", "note", "a_host", "b_host",
    "floor_from", *joules.ENERGY_FIELDS,
)  # fmt: skip


def _noise(point: PointRecord | None, time: str) -> float | None:
    """The relative noise the run recorded for the time compared (absent in older files)."""
    if point is None:
        return None
    return ((point.kernel_s if time == "kernel" else point.end_to_end_s) or {}).get("noise")


def row(comparison: Comparison, time: str = "kernel") -> dict[str, object]:
    """A comparison as a flat row of :data:`ROW_FIELDS` (None where there is no value),
    and ``hosts``: the hosts compared where a side held the point from several."""
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
        "floor": comparison.floor or None,
        "floor_from": comparison.floor_from or None,
        "b_noise": _noise(b, time),
        "note": comparison.note,
        "a_host": None if a is None else a.host,
        "b_host": None if b is None else b.host,
        "hosts": comparison.hosts,
        **joules.row(comparison.energy),
    }
