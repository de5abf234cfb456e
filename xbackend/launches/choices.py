"""How a backend is handed the tuner's choices, without knowing the tuner; and what the
tuner times: a configuration of a variant's geometry (``Candidate``), and its trial.

A tuned variant asks its backend's ``Choices``, if it holds any, for the configuration
to use on a product; ``xbackend.tuning`` provides the one that reads ``xbackend tune``'s
cache (``tuning.cached_choices``), and ``Backend.use_choices`` hands it over. Without
choices a variant runs its geometry's default (``geometries.py``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from xbackend.operations import Operation


@dataclasses.dataclass(frozen=True)
class ChoiceRequest:
    """One product of a tuned variant, as a cache of choices is keyed and checked."""

    backend: str
    device: str  # the device's name
    variant: str
    op: Operation
    dtype: str  # the dtype's name, "float32"
    shape_class: str  # see shape_class: small, medium, large
    size: tuple[int, int, int] | None  # the output's M and N, and K: a split is refitted
    # What the kernel is built from: driver version and a digest of the kernel file and
    # its fixed options (Backend.kernel_build); a choice made for another is stale.
    build: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # Why this device cannot run a configuration (Backend.tile_problem), or None.
    check: Callable[[Mapping[str, int]], str | None] | None = None


class Choices(Protocol):
    """A source of tuned configurations: the tune cache, or a test's stand-in."""

    def choice(self, request: ChoiceRequest) -> Mapping[str, int] | None:
        """The parameters to use for ``request``'s product, or None for the default."""
        ...


MAX_COUNT = 2**53  # counts (blocks, samples, parameters) that a float holds exactly


def is_count(value: object) -> bool:
    """Whether ``value`` is a count: an int (never a bool) from 0 to ``MAX_COUNT``."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT


class Candidate(Protocol):
    """What the search and the race time: a configuration with a label, its parameters by
    name (``to_dict``), its K ranges (``slices``; 1 where it splits none), and the groups
    its launch has over an M×N output (``blocks``; 0 where it does not say)."""

    @property
    def slices(self) -> int: ...

    @property
    def label(self) -> str: ...

    def to_dict(self) -> dict[str, int]: ...

    def blocks(self, M: int, N: int) -> int: ...

    def refitted(self, blocks: int, M: int, N: int, K: int) -> Candidate:
        """Itself, its K ranges refitted to a product of another size so that its launch
        has about ``blocks`` groups (where it splits K)."""
        ...


@dataclasses.dataclass(frozen=True)
class TileChoice:
    """A candidate of a fixed-tile variant: its tile, the one parameter it takes."""

    TILE: int
    slices: int = 1  # no split along K: what a cache entry of a split reads

    @property
    def label(self) -> str:
        return f"T={self.TILE}"

    def to_dict(self) -> dict[str, int]:
        return {"TILE": self.TILE}

    def blocks(self, M: int, N: int) -> int:
        """The groups of a launch over an M×N output."""
        return -(-M // self.TILE) * -(-N // self.TILE) if self.TILE > 0 else 0

    def refitted(self, blocks: int, M: int, N: int, K: int) -> TileChoice:
        return self  # no split along K


@dataclasses.dataclass(frozen=True)
class ParameterChoice:
    """A candidate of a variant whose family declares parameters (``parameters`` in its
    manifest, as Kernel Tuner's ``tune_params``): its tile where it takes one, and a value
    of each parameter."""

    values: tuple[tuple[str, int], ...]
    slices: int = 1  # no split along K

    @property
    def label(self) -> str:
        return " ".join(f"{name}={value}" for name, value in self.values) or "default"

    def to_dict(self) -> dict[str, int]:
        return dict(self.values)

    def blocks(self, M: int, N: int) -> int:
        return 0  # its launch is its family's: nothing to refit

    def refitted(self, blocks: int, M: int, N: int, K: int) -> ParameterChoice:
        return self


@dataclasses.dataclass
class Trial:
    config: Candidate
    tflops: float | None  # None: not timed (wrong result or error)
    status: str  # "ok", "wrong", or the error
    # Joules per product, where the tune's objective is energy (tuning/objective.py).
    joules: float | None = None

    @property
    def score(self) -> float:
        """How the search ranks a trial, higher first: the fewer joules per product where
        they were read (an energy tune), else the higher rate; 0 where not timed."""
        if self.joules is not None and self.joules > 0:
            return 1.0 / self.joules
        return self.tflops or 0.0


# Times a batch of configurations, one trial each, in their order.
Timer = Callable[[Sequence[Any]], list[Trial]]


def shape_class(M: int, N: int, compute_units: int) -> str:
    """How a product's output fills a device: the key ``tune`` caches a choice under.

    "small": fewer 128×128 tiles than multiprocessors (a split along K pays);
    "medium": up to 4 per multiprocessor; "large": more.
    """
    tiles = math.ceil(M / 128) * math.ceil(N / 128)
    if tiles < compute_units:
        return "small"
    if tiles <= 4 * compute_units:
        return "medium"
    return "large"
