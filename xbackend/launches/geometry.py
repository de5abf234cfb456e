"""What a geometry is: how a variant's kernels are launched (``geometries.py`` says which
there are).

A geometry plans a product of a variant (``plan``), says why a configuration cannot run
on a device (``problem``), gives the configurations ``tune`` tries on a product
(``space``) and how it searches them (``search``), reads a configuration back from its
parameters (``candidate``: a measurement's, a cache entry's) and says what in a cache
entry it cannot take (``entry_problem``). ``per_product``: whether it picks its
configuration for each product (the block tiles of kernels/mm_warp) or runs the one it
is asked for, its manifest's default otherwise (the "element" geometry of every other
family, a user's included).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol

import numpy as np

from xbackend.launches.choices import Candidate, Timer, Trial
from xbackend.launches.launch import Product
from xbackend.launches.specs import DeviceInfo, VariantSpec
from xbackend.operations import Shape

Array = np.ndarray[Any, Any]


class Planner(Protocol):
    """What a geometry asks of the backend it plans for (a compiled backend is one): its
    device, the configurations the device runs, and the choices it holds."""

    name: ClassVar[str]

    @property
    def device(self) -> DeviceInfo: ...

    def tiles(self, variant: str, op: str = "mm", itemsize: int = 4) -> tuple[int, ...]: ...

    def tile_problem(
        self, variant: str, tile: int | None, itemsize: int = 4, op: str = "mm",
        params: Mapping[str, int] | None = None,
    ) -> str | None: ...  # fmt: skip

    def choice(
        self, variant: str, op: str, dtype: np.dtype[Any], shape_class: str,
        size: tuple[int, int, int] | None = None,
    ) -> Mapping[str, int] | None: ...  # fmt: skip

    def chosen_parameters(
        self, spec: VariantSpec, op: str, tile: int | None, dtype: np.dtype[Any]
    ) -> dict[str, int] | None: ...


class Geometry(abc.ABC):
    """A way of launching a variant's kernels (the module's docstring)."""

    per_product: ClassVar[bool] = False

    @abc.abstractmethod
    def plan(
        self, backend: Planner, op: str, spec: VariantSpec, tile: int | None,
        A: Array, B: Array, params: Mapping[str, int] | None, wide: bool,
    ) -> Product:  # fmt: skip
        """The launches of one product, at ``tile`` with ``params`` (None: as the
        geometry chooses), with 64-bit offsets where ``wide``."""

    @abc.abstractmethod
    def problem(
        self, device: DeviceInfo, spec: VariantSpec, tile: int | None, itemsize: int,
        words: tuple[str, str], params: Mapping[str, int] | None,
    ) -> str | None:  # fmt: skip
        """Why a group of ``spec`` at ``tile`` with ``params`` cannot run on ``device``
        (``words``: the API's words for its workers and their memory)."""

    @abc.abstractmethod
    def space(
        self, backend: Planner, spec: VariantSpec, shape: Shape, itemsize: int, op: str
    ) -> list[Candidate]:
        """The configurations ``tune`` tries for a product of ``shape`` on ``backend``."""

    @abc.abstractmethod
    def candidate(self, params: Mapping[str, int]) -> Candidate:
        """A configuration read back from its parameters."""

    def search(self, space: Sequence[Candidate], time: Timer) -> list[Trial]:
        """The trials of a coarse search of ``space`` (by default: all of it)."""
        return time(list(space))

    def claims(self, params: Mapping[str, Any]) -> bool:
        """Whether a cache entry's parameters are one of this geometry's configurations."""
        return False

    def entry_problem(self, params: Mapping[str, Any]) -> str | None:
        """Why a cache entry's parameters are no configuration of this geometry on any
        device (the device's own limits are checked at lookup), or None."""
        return None
