"""Predicting a point's time from the sizes its line already ran: what the budget skips."""

from __future__ import annotations

from collections.abc import Hashable


class CostModel:
    """Predicts a configuration's time per run from the sizes it already ran.

    With two or more measured sizes it fits ``t = overhead + flops / rate`` to
    the two largest; with one it scales linearly in flops, but only from a time
    long enough (10 ms) not to be launch overhead. Without a prediction, it
    does not skip.
    """

    def __init__(self) -> None:
        self._seen: dict[Hashable, list[tuple[int, float]]] = {}

    def add(self, config: Hashable, flops: int, seconds: float) -> None:
        self._seen.setdefault(config, []).append((flops, seconds))

    def predict(self, config: Hashable, flops: int) -> float | None:
        seen = sorted(self._seen.get(config, []))
        if len(seen) >= 2 and seen[-1][0] > seen[-2][0]:
            (f1, t1), (f2, t2) = seen[-2], seen[-1]
            slope = max((t2 - t1) / (f2 - f1), t2 / f2 / 4)
            return max(t2 + slope * (flops - f2), 0.0)
        if seen and seen[-1][1] >= 0.01:
            return seen[-1][1] * flops / seen[-1][0]
        return None
