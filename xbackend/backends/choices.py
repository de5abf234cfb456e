"""How a backend is handed the tuner's choices, without knowing the tuner.

A tuned variant (kernels/mm_warp) asks its backend's ``Choices``, if it holds
any, for the configuration to use on a product; ``xbackend.tuning`` provides the
one that reads ``xbackend tune``'s cache (``tuning.cached_choices``), and
``Backend.use_choices`` hands it over. Without choices a tuned variant runs the
size-aware default of ``warp.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Protocol

from xbackend.operations import Operation


@dataclasses.dataclass(frozen=True)
class ChoiceRequest:
    """One product of a tuned variant, as a cache of choices is keyed and checked."""

    backend: str
    device: str  # the device's name
    variant: str
    op: Operation
    dtype: str  # the dtype's name, "float32"
    shape_class: str  # see warp.shape_class: small, medium, large
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
