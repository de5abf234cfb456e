"""What the sampler says of the runs it verified: the first wrong one, in words.

``sampler.sample`` verifies every output it downloads after the first with the caller's
``verify`` (``Verifier``); the first it finds wrong is a ``WrongRun``, which
``check`` and ``compare`` name in their verdicts ("its 7th timed run").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from xbackend.operations import Operation, operation
from xbackend.problems import FREIVALDS, FULL, Freivalds, Reference, check

Array = np.ndarray[Any, Any]

# Whether a run's output is right (``Verifier``): plain data where the kernel is
# measured in a process of its own, which verifies it there.
Verify = Callable[[Array], bool]


@dataclasses.dataclass
class WrongRun:
    """The first run after the first whose downloaded output ``verify`` found wrong."""

    kind: str  # "warm-up" or "timed"
    number: int  # which of its kind, from 1
    result: Array
    batch: int = 0  # a sample's batch of this many launches (its last's output); 0: its run

    @property
    def said(self) -> str:
        """``its 7th timed run``; ``the last launch of its 7th timed run's batch of 40``."""
        run = f"its {ordinal(self.number)} {self.kind} run"
        return f"the last launch of {run}'s batch of {self.batch}" if self.batch else run


def ordinal(number: int) -> str:
    """1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, 21st."""
    teen = 10 <= number % 100 <= 20
    suffix = "th" if teen else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


class Verifier:
    """Whether a run's output passes ``check``: what the sampler asks of each output after
    the first (``Backend.measure``'s ``verify``), against the reference and with the
    tolerance the first run is checked with (``method``: ``full`` or ``freivalds``, seeded
    by ``seed``, as ``measure.Inputs`` makes them).

    Pickled without its reference: a kernel measured in a process of its own (isolation.py)
    is verified there, where its outputs are, and that process makes the reference from
    A and B (which its request carries anyway) only where an output is not bit for bit
    the first run's (the sampler's shortcut), never for a deterministic kernel: a full
    reference at 4096² is 256 MB to send, and seconds to make."""

    def __init__(
        self, A: Array, B: Array, op: str | Operation = "mm", method: str = FULL, seed: int = 0,
        reference: Reference | Freivalds | None = None,
    ):  # fmt: skip
        self.A, self.B, self.op, self.method, self.seed = A, B, operation(op).name, method, seed
        self._reference = reference

    def __getstate__(self) -> dict[str, Any]:
        return {**vars(self), "_reference": None}

    @property
    def reference(self) -> Reference | Freivalds:
        if self._reference is None:
            self._reference = (
                Freivalds.of(self.A, self.B, self.op, seed=self.seed)
                if self.method == FREIVALDS
                else Reference.of(self.A, self.B, self.op)
            )
        return self._reference

    def __call__(self, result: Array) -> bool:
        return check(result, self.reference).equal
