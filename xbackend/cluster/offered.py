"""A device a worker offers, as the command line plans with it: a ``Backend`` that knows
its device and its variants' names and runs nothing.

``compare`` builds its plan from opened backends (the GPU presets' sizes, ``--variants
ladder``, the check of the variants asked for). On a cluster the backends are opened on
the workers; the main process plans with these stand-ins instead, and the workers make
the lines (``configs``) from the real ones.
"""

from __future__ import annotations

from typing import Any, ClassVar

from xbackend.backends.interface import Backend, Execution
from xbackend.cluster.devices import Offer
from xbackend.errors import XBackendError
from xbackend.launches.specs import DeviceInfo


class Offered(Backend):
    """The planning view of a device held by a worker (see the module)."""

    name: ClassVar[str] = "offered"

    def __init__(self, device: str | int | None = None) -> None:
        raise XBackendError("an offered device comes from a worker: Offered.of(offer)")

    @classmethod
    def of(cls, offer: Offer) -> Offered:
        named = _classes.setdefault(
            offer.backend, type(f"Offered_{offer.backend}", (cls,), {"name": offer.backend})
        )
        offered = object.__new__(named)
        offered._device, offered._variants = offer.device, offer.variants
        return offered

    _device: DeviceInfo
    _variants: dict[str, list[str]]

    @classmethod
    def available(cls) -> tuple[bool, str]:
        return True, ""

    @classmethod
    def list_devices(cls) -> list[DeviceInfo]:
        return []

    @property
    def device(self) -> DeviceInfo:
        return self._device

    def variants(self, op: str = "mm") -> list[str]:
        return list(self._variants.get(op, []))

    def _execution(
        self, op: str, variant: str, tile: int | None, A: Any, B: Any, params: Any = None
    ) -> Execution:
        raise XBackendError(f"{self.device.name} runs on its worker, not here")


_classes: dict[str, type[Offered]] = {}
