"""The finalists' race of ``xbackend tune``: the best few configurations and the default,
timed in turns until one's interval lies below the others' or a time cap (``race``), and
who won (``verdict``)."""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from xbackend.errors import XBackendError
from xbackend.launches.choices import Candidate
from xbackend.measuring.timing import bootstrap_median_interval

# The race of the finalists (see ``race``). The finalists: the search's best two, and
# the others within FINALIST_WITHIN of the best, FINALISTS in all at most; the default
# configuration besides.
FINALISTS = 3
FINALIST_WITHIN = 0.05
TURN_SAMPLES = 5  # samples of one finalist's turn
MIN_RACE_SAMPLES = 10  # samples of each finalist before it may drop out of the race
MAX_RACE_SAMPLES = 400  # samples of each finalist at most, whatever the time cap

# Timed samples (kernel seconds) of a configuration: ``sampler(config, count)``.
Sampler = Callable[[Any, int], Sequence[float]]


class CandidateFailed(XBackendError):
    """A configuration's run hung or crashed (a user's kernel, in a process of its own):
    in the race, that finalist's end, the others race on."""


@dataclasses.dataclass
class Finalist:
    """A configuration in the race, with the samples of its turns and their summary."""

    config: Candidate
    default: bool = False  # the configuration the variant runs without a cache
    samples_s: list[float] = dataclasses.field(default_factory=list)
    median_s: float = float("nan")
    interval_s: tuple[float, float] = (float("nan"), float("nan"))  # 95%, of the median
    failure: str = ""  # why it left the race, where its run hung or crashed

    def summarise(self) -> None:
        self.median_s = statistics.median(self.samples_s)
        self.interval_s = bootstrap_median_interval(self.samples_s)

    def below(self, other: Finalist) -> bool:
        """Whether this one's interval lies entirely below ``other``'s: faster, and told apart."""
        return self.interval_s[1] < other.interval_s[0]


@dataclasses.dataclass
class Race:
    """The finalists' race: who won, by how much, and how sure that is."""

    finalists: list[Finalist]
    winner: Finalist
    runner_up: Finalist | None  # the fastest of the others
    margin: float | None  # the runner-up's median over the winner's, minus 1
    separated: bool  # the winner's interval lies below every other finalist's
    tie: bool  # the fastest did not separate from the default: the default won
    rounds: int = 0
    seconds: float = 0.0


def race(
    racers: list[Finalist],
    sampler: Sampler,
    time_cap_s: float,
    *,
    turn_samples: int = TURN_SAMPLES,
    clock: Callable[[], float] = time.perf_counter,
) -> Race:
    """Time the finalists in turns, round-robin (a turn of ``turn_samples`` each, again
    and again), so that a drift of the device's clock or temperature falls on all of
    them alike. Once each has MIN_RACE_SAMPLES, a finalist whose 95% interval lies
    above the fastest's drops out; the race ends when one is left, at ``time_cap_s``,
    or at MAX_RACE_SAMPLES each. See ``verdict`` for who wins. A finalist whose run
    fails (``CandidateFailed``) leaves the race with its ``failure`` and no part in the
    verdict; where every one fails, the last failure is raised."""
    started = clock()
    active = list(racers)
    rounds = 0
    while True:
        for finalist in list(active):
            try:
                finalist.samples_s.extend(sampler(finalist.config, turn_samples))
            except CandidateFailed as error:
                finalist.failure = str(error)
                active.remove(finalist)
                if not active:
                    raise
        rounds += 1
        for finalist in active:
            finalist.summarise()
        running = [finalist for finalist in racers if not finalist.failure]
        if min(len(finalist.samples_s) for finalist in active) >= MIN_RACE_SAMPLES:
            fastest = min(running, key=lambda finalist: finalist.median_s)
            active = [f for f in active if f is fastest or not fastest.below(f)]
        exhausted = max(len(finalist.samples_s) for finalist in active) >= MAX_RACE_SAMPLES
        if len(active) <= 1 or exhausted or clock() - started >= time_cap_s:
            break
    return verdict(running, rounds, clock() - started)


def verdict(racers: list[Finalist], rounds: int = 0, seconds: float = 0.0) -> Race:
    """Who won: the fastest median, unless its interval does not lie below the default's
    (a tie: the default is kept, not worth a cache entry of its own)."""
    ranked = sorted(racers, key=lambda finalist: finalist.median_s)
    default = next((finalist for finalist in racers if finalist.default), None)
    tie = default is not None and ranked[0] is not default and not ranked[0].below(default)
    winner = default if tie and default is not None else ranked[0]
    others = [finalist for finalist in ranked if finalist is not winner]
    runner_up = others[0] if others else None
    margin = runner_up.median_s / winner.median_s - 1 if runner_up else None
    separated = all(winner.below(other) for other in others)
    return Race(racers, winner, runner_up, margin, separated, tie, rounds, round(seconds, 2))
