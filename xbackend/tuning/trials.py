"""One candidate of ``xbackend tune`` timed and verified (``time_trial``), or one window of
its joules (``window_joules``), measured as ``Measure`` says: by the backend, in this
process (``IN_PROCESS``), or where the candidate is a user's kernel, in a process of its
own under a deadline (``tune --kernels``: the CLI hands ``isolation.Isolation`` in).

A candidate that fails (its build, its launch, a wrong result, a hang or a crash of its
process) is that trial's status, and the search goes on; a measure raises
``CandidateFailed`` where the candidate's process hung or died, which the race also takes
as that finalist's end (``racing.race``).
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from xbackend.errors import XBackendError
from xbackend.launches.choices import Candidate, ParameterChoice, Trial
from xbackend.launches.geometries import geometry_of
from xbackend.measuring.sampler import joules_per_product
from xbackend.measuring.timing import Sampling
from xbackend.measuring.verified import Verifier
from xbackend.problems import Reference, Shape, check, flops, output_size
from xbackend.tuning.objective import Objective

if TYPE_CHECKING:
    from xbackend.backends.interface import Backend
    from xbackend.launches.specs import Measurement


class Measure(Protocol):
    """How the tuner measures a product of ``variant``: ``backend.measure``'s call."""

    def __call__(
        self, backend: Backend, A: np.ndarray, B: np.ndarray, variant: str, **options: Any
    ) -> Measurement: ...

    def isolates(self, backend: Backend, variant: str, op: str) -> bool:
        """Whether ``variant``'s kernels run in a process of their own (then nothing of
        them is built in this one: no ``prebuild``)."""
        ...


class _InProcess:
    """The backend's own ``measure``, in this process."""

    def __call__(
        self, backend: Backend, A: np.ndarray, B: np.ndarray, variant: str, **options: Any
    ) -> Measurement:
        return backend.measure(A, B, variant, **options)

    def isolates(self, backend: Backend, variant: str, op: str) -> bool:
        return False


IN_PROCESS: Measure = _InProcess()


@dataclasses.dataclass(frozen=True)
class Product:
    """One product the tuner times: the operation, its operands and their reference."""

    op: str
    shape: Shape
    A: np.ndarray
    B: np.ndarray
    reference: Reference

    @property
    def output(self) -> tuple[int, int]:
        return output_size(self.op, self.shape)


def time_trial(
    backend: Backend,
    product: Product,
    variant: str,
    config: Candidate | None,
    samples: int,
    objective: Objective,
    sampling: Sampling,
    measure: Measure = IN_PROCESS,
) -> Trial:
    """``config`` of ``variant`` (None: what the variant runs untold) timed on
    ``product``, each of its results checked; a failure is the trial's status."""
    params = None if config is None else config.to_dict()
    geometry = geometry_of(backend.variant_spec(variant, product.op))
    try:
        measured = measure(
            backend, product.A, product.B, variant, op=product.op, params=params,
            sampling=objective.sampling(sampling), warmup=1, samples=samples,
            min_samples=samples, verify=Verifier(product.A, product.B, product.op,
                                                 reference=product.reference),
        )  # fmt: skip
    except Exception as error:  # a candidate that fails to build, launch or return
        return Trial(config or ParameterChoice(()), None, str(error)[:200])
    if config is not None:
        chosen = config
    elif geometry is not None:  # what it ran: its parameters, or its tile
        ran = measured.params or ({"TILE": measured.tile} if measured.tile else {})
        chosen = geometry.candidate(ran) if ran else ParameterChoice(())
    else:
        chosen = ParameterChoice(())
    # Every output after the first verified as it came (a candidate right at its first and
    # last run, wrong between them, is never chosen); the first and last checked here too.
    if measured.wrong is not None or not all(
        check(out, product.reference).equal for out in (measured.result, measured.last_result)
    ):
        return Trial(chosen, None, "wrong")
    unread = objective.unread(measured)
    if unread:  # an energy tune ranks joules: a candidate without them is not ranked
        return Trial(chosen, None, unread)
    seconds = statistics.median(measured.kernel_s)
    rate = flops(product.op, product.shape) / seconds / 1e12
    return Trial(chosen, rate, "ok", joules_per_product(measured.state))  # None: not read


def window_joules(
    backend: Backend,
    product: Product,
    variant: str,
    config: Candidate,
    objective: Objective,
    sampling: Sampling,
    measure: Measure = IN_PROCESS,
) -> float:
    """One window's joules per product of ``config`` (the race of an energy tune)."""
    measured = measure(
        backend, product.A, product.B, variant, op=product.op, params=config.to_dict(),
        sampling=objective.sampling(sampling), warmup=1, samples=1, min_samples=1,
    )  # fmt: skip
    unread = objective.unread(measured)
    if unread:
        raise XBackendError(f"the race of {variant} {config.label}: {unread}")
    return joules_per_product(measured.state) or 0.0
