"""Summaries of timing samples: the median with its spread, and the raw samples kept."""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence


@dataclasses.dataclass(frozen=True)
class Stats:
    """Seconds: the median and quartiles (robust to the odd slow sample), min, max, mean."""

    n: int
    median: float
    q1: float
    q3: float
    min: float
    max: float
    mean: float

    @classmethod
    def of(cls, samples_s: Sequence[float]) -> Stats:
        if not samples_s:
            raise ValueError("no samples")
        ordered = sorted(samples_s)
        if len(ordered) > 1:
            q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
        else:
            q1 = q3 = ordered[0]
        return cls(
            n=len(ordered),
            median=statistics.median(ordered),
            q1=q1,
            q3=q3,
            min=ordered[0],
            max=ordered[-1],
            mean=statistics.fmean(ordered),
        )

    @property
    def spread(self) -> float:
        """Interquartile range relative to the median."""
        return (self.q3 - self.q1) / self.median if self.median > 0 else 0.0

    def to_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


def format_seconds(seconds: float) -> str:
    """A duration with a unit that keeps three significant digits readable."""
    if seconds != seconds:  # NaN
        return "—"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"
