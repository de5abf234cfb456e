"""Runtimes known to compute a shipped variant wrongly, and the variants each refuses.

A variant whose kernel is right (oclgrind finds no race, no access out of bounds and no
read of memory never written; NVIDIA's OpenCL, CUDA and Intel's CPU runtime compute it
right) can still be miscompiled by one runtime. Such a variant is refused on that runtime
with the reason, as a missing library is: ``xbackend devices`` prints SKIP with it and a
comparison lists the line as skipped, where it would otherwise fail now and then with a
wrong result and no word of why. Each entry says what was measured and where
(docs/kernels.md, "Runtimes that miscompile a shipped kernel").

Set ``XBACKEND_RUN_KNOWN_FAULTS=1`` to run the variants anyway: to check whether a newer
driver still miscompiles them (tests/test_pocl.py does it on every PoCL it finds).
"""

from __future__ import annotations

import dataclasses
import os

from xbackend.families.variant import VariantSpec
from xbackend.launches.specs import DeviceInfo

RUN_ANYWAY_ENV = "XBACKEND_RUN_KNOWN_FAULTS"
DOC = 'docs/kernels.md, "Runtimes that miscompile a shipped kernel"'


@dataclasses.dataclass(frozen=True)
class RuntimeFault:
    """Variants of one shipped family that a runtime's drivers compute wrongly."""

    platform: str  # the OpenCL platform's name, as the device reports it
    drivers: tuple[str, ...]  # the driver versions it holds for: their beginnings
    family: str  # the shipped family's folder under kernels/
    variants: tuple[str, ...]
    runtime: str  # the runtime as a user knows it
    what: str  # what goes wrong, and what was measured

    def holds(self, device: DeviceInfo, spec: VariantSpec) -> bool:
        """Whether ``spec`` on ``device`` is one of the builds this fault names."""
        return (
            device.platform == self.platform
            and device.driver_version.startswith(self.drivers)
            and spec.source == f"shipped:{self.family}"
            and spec.name in self.variants
        )


FAULTS = (
    RuntimeFault(
        platform="Portable Computing Language",
        drivers=("5.",),
        family="mm_reg",
        variants=("reg2d", "reg2d_g4"),
        runtime="PoCL 5",
        what=(
            "now and then its work-group compiler keeps one work-item's column index for "
            "the whole group past the K loop's barriers (kernels/mm_reg/mm_reg.cl), and "
            "that build stores few or none of C's elements: on PoCL 5.0 with LLVM 16, "
            "reg2d_g4 was wrong in 10 of 64 fresh builds and reg2d in 2 (-cl-opt-disable), "
            "reg2d_g4 in 1 of 48 optimized builds, and PoCL's kernel cache keeps a wrong "
            "build"
        ),
    ),
)


def fault_of(device: DeviceInfo, spec: VariantSpec) -> str | None:
    """Why ``spec`` is refused on ``device`` (a runtime known to compute it wrongly),
    or None; None for every variant while ``XBACKEND_RUN_KNOWN_FAULTS`` is set."""
    if os.environ.get(RUN_ANYWAY_ENV):
        return None
    for fault in FAULTS:
        if fault.holds(device, spec):
            return (
                f"{fault.runtime} (driver {device.driver_version}) computes it wrongly: "
                f"{fault.what}; {DOC}; {RUN_ANYWAY_ENV}=1 runs it anyway"
            )
    return None
