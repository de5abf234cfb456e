"""What ``xbackend tune`` minimises: the median kernel time (``time``, the default), or the
joules per product read from the device's energy counter (``energy``; docs/energy.md).

With ``energy``, each candidate is measured as for time, then its product is launched
back to back for a window (``Sampling.energy_s``: ``WINDOW_S`` unless given) between two
steps of the device's energy counter (NVML's; ``sampler.measure_energy``). The
search ranks the candidates by those joules (``Trial.score``), and the finalists race in
windows: a turn is one window a finalist, the race's samples are joules per product, and
its intervals, margin and tie are of joules (``racing.race`` is the same race). A device
without a counter is refused before anything runs (``counter_problem``): an energy tune
never falls back to time.

The tune cache entry records its objective (``objective``; an entry without one was tuned
for time, as every entry before this one was) and, for energy, the choice's joules per
product and the race's intervals of them (``joules_interval``,
``runner_up_joules_interval``; ``interval_s`` is of seconds, so an energy entry has none).
A key holds one choice, the last tune's: the tuned variants run it whatever its
objective, and ``tune --show`` says which it was.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from xbackend.backends.interface import Backend
from xbackend.launches.choices import Trial
from xbackend.launches.specs import Measurement
from xbackend.measuring.sampler import joules_per_product
from xbackend.measuring.timing import Sampling
from xbackend.tuning.racing import TURN_SAMPLES, Race

TIME, ENERGY = "time", "energy"
OBJECTIVES = (TIME, ENERGY)
# An energy window of half a second: about five of an H200 counter's steps (every 64-102
# ms), the window aligned to them (sampler.measure_energy, docs/energy.md); a search of 25
# candidates takes some 15 s more than its time alone.
WINDOW_S = 0.5
# The race of an energy tune, at most: MIN_RACE_SAMPLES (10) windows of each of four
# finalists take 20 s at the default window before any may drop out.
RACE_S = 30.0


@dataclasses.dataclass(frozen=True)
class Objective:
    """What a tune minimises, and the energy window each measurement of it takes."""

    name: str = TIME
    window_s: float = WINDOW_S

    def __post_init__(self) -> None:
        if self.name not in OBJECTIVES:
            raise ValueError(f"objective {self.name!r}: expected one of {', '.join(OBJECTIVES)}")
        if self.energy and not self.window_s > 0:
            raise ValueError(f"energy window {self.window_s!r} s: expected more than 0")

    @property
    def energy(self) -> bool:
        return self.name == ENERGY

    @property
    def turn_samples(self) -> int:
        """Samples of a finalist's turn in the race: one window where they are joules."""
        return 1 if self.energy else TURN_SAMPLES

    def sampling(self, base: Sampling) -> Sampling:
        """How a candidate is measured: ``base``, with the energy window where it counts."""
        return dataclasses.replace(base, energy_s=self.window_s) if self.energy else base

    def unread(self, measured: Measurement) -> str | None:
        """Why an energy tune's measurement has no joules (None: it has, or counts none)."""
        if not self.energy or joules_per_product(measured.state) is not None:
            return None
        energy = (measured.state or {}).get("energy") or {}
        return f"no energy reading: {energy.get('unread', 'the window read nothing')}"


def objective_of(entry: Mapping[str, Any]) -> str:
    """What a cache entry was tuned for: its ``objective``, else time (older entries)."""
    found = entry.get("objective", TIME)
    return found if isinstance(found, str) else TIME


def counter_problem(backend: Backend) -> str | None:
    """Why ``backend``'s device cannot be tuned for energy (it has no energy counter that
    answers here), or None."""
    counter = getattr(backend.monitor(), "energy_mj", None)
    if counter is not None and counter() is not None:
        return None
    return (
        f"{backend.name} on {backend.device.name} has no energy counter here: tune "
        "--objective energy reads NVML's (an NVIDIA GPU, and nvidia-ml-py: pip install "
        "'xbackend[nvml]'); tune for time without --objective"
    )


def digits(value: float) -> float:
    """A number as a cache entry keeps it: four significant digits."""
    return float(f"{value:.4g}")


def entry_fields(objective: Objective, chosen: Trial, race: Race | None) -> dict[str, Any]:
    """What a cache entry says of its objective: the objective, and for energy the
    choice's joules per product and the race's intervals of them (replacing the race's
    ``interval_s`` and ``runner_up_interval_s``, which are of seconds)."""
    if not objective.energy:
        return {"objective": TIME}
    assert chosen.joules is not None
    fields: dict[str, Any] = {"objective": ENERGY, "joules_per_product": digits(chosen.joules),
                              "energy_window_s": objective.window_s}  # fmt: skip
    if race is not None:
        fields["joules_interval"] = [digits(value) for value in race.winner.interval_s]
        if race.runner_up is not None:
            interval = race.runner_up.interval_s
            fields["runner_up_joules_interval"] = [digits(value) for value in interval]
    return fields


ENTRY_NUMBERS = ("joules_per_product", "energy_window_s")  # optional, positive
ENTRY_INTERVALS = ("joules_interval", "runner_up_joules_interval")  # optional, [low, high]
