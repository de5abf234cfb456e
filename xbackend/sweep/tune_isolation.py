"""How ``tune`` measures a candidate: a user's kernels in a process of their own, under the
deadline, wherever the tune runs (the command's own process, or a Dask worker's).

A candidate of a user's family (``--kernels``) can hang or crash; measured in the tuning
process, the first hangs the tune for good and the second ends it. ``Isolated`` is the
``tuning.Measure`` that sends such a candidate to an ``isolation.Isolation`` (a process of
its own, each step under the kernel deadline), so that a hang or a crash is that
candidate's failure (``CandidateFailed``) and the tune goes on; xbackend's own kernels
are measured where the tune runs. The sweep's layer: it takes the configurations, the
isolation and the measurement's errors, which the tuner below it knows nothing of.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from xbackend.backends.compiled import CompiledBackend
from xbackend.launches.geometries import per_product
from xbackend.sweep.configs import Config
from xbackend.sweep.isolation import Isolation, isolated
from xbackend.sweep.measure import Described
from xbackend.tuning.racing import CandidateFailed

if TYPE_CHECKING:
    import numpy as np

    from xbackend.backends.interface import Backend
    from xbackend.launches.specs import Measurement


class Isolated:
    """``tuning.Measure``: a user's kernels in ``isolation``'s process, under its deadline,
    as ``compare`` measures them (``isolation.py``); xbackend's own kernels here."""

    def __init__(self, isolation: Isolation):
        self.isolation = isolation

    def isolates(self, backend: Backend, variant: str, op: str) -> bool:
        return isolated(Config(backend.name, backend, op, variant, None, "float32"))

    def __call__(
        self, backend: Backend, A: np.ndarray, B: np.ndarray, variant: str, **options: Any
    ) -> Measurement:
        op = options.pop("op", "mm")
        if not self.isolates(backend, variant, op):
            return backend.measure(A, B, variant, op=op, **options)
        config = Config(backend.name, backend, op, variant, None, A.dtype.name)
        if options.get("params") is None:  # the process of its own has no choices of ours
            options["params"] = untold(backend, variant, op, A.dtype)
        try:
            return self.isolation.measure(config, A, B, **options)
        except Described as error:  # it hung, died, or failed there
            raise CandidateFailed(str(error)) from error


def untold(backend: Backend, variant: str, op: str, dtype: np.dtype) -> dict[str, int] | None:
    """The configuration ``variant`` runs untold here: its tile and parameters as this
    backend's choices give them (none while the tuner times the default), sent to the
    process of its own, whose backend reads the tune cache itself. None: chosen per
    product (block tiles), which the process does as this one would with the cache."""
    spec = backend.variant_spec(variant, op)
    if per_product(spec) or not isinstance(backend, CompiledBackend):
        return None
    tile = backend.default_tile(variant, op, dtype)
    return spec.configuration(tile, backend.chosen_parameters(spec, op, tile, dtype)) or None
