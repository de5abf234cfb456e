"""Which geometries there are: xbackend's two, and those installed packages register.

"element" (``element.py``) launches a family's kernels as its manifest writes; "block-
tiles" (``block_tiles.py``) is kernels/mm_warp's, its configuration chosen per product.
A package adds its own through the entry-point group ``xbackend.geometries`` (a name and
a ``geometry.Geometry`` instance, as backends are added), and a manifest names one with
``geometry = "NAME"``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any

from xbackend.launches.block_tiles import BlockTiles
from xbackend.launches.element import Element
from xbackend.launches.geometry import Geometry
from xbackend.launches.specs import VariantSpec

ENTRY_POINTS = "xbackend.geometries"


@functools.cache
def registry() -> dict[str, Geometry]:
    """Every geometry by name: xbackend's, then the installed packages'."""
    found: dict[str, Geometry] = {"element": Element(), "block-tiles": BlockTiles()}
    for entry in entry_points(group=ENTRY_POINTS):
        found.setdefault(entry.name, entry.load())
    return found


def geometry_of(spec: VariantSpec) -> Geometry | None:
    """The geometry of ``spec``; None for a library line (the vendor's GEMM, NumPy) or a
    geometry no package here registers."""
    return registry().get(spec.geometry) if spec.kernel else None


def per_product(spec: VariantSpec) -> bool:
    """Whether ``spec`` picks its configuration per product (its geometry says)."""
    found = geometry_of(spec)
    return found is not None and found.per_product


def of_entry(params: Mapping[str, Any]) -> Geometry:
    """The geometry whose configuration a cache entry's parameters are: the first that
    claims them, else the element geometry (a tile, a family's parameters)."""
    found = registry()
    return next((g for g in found.values() if g.claims(params)), found["element"])
