"""The errors xbackend raises on purpose, shared by every layer.

``XBackendError`` is their base; ``UnsupportedParameter`` is also a ``ValueError``
and ``DeviceOutOfMemory`` a ``MemoryError``, so callers can catch either family.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "BackendUnavailable",
    "DeviceOutOfMemory",
    "KernelCompileError",
    "UnsupportedParameter",
    "XBackendError",
]


class XBackendError(Exception):
    """Base class of every error xbackend raises on purpose."""


class BackendUnavailable(XBackendError):
    """The backend cannot run here; ``reason`` says what to install or configure."""

    def __init__(self, name: str, reason: str):
        super().__init__(f"backend '{name}' is unavailable: {reason}")
        self.name = name
        self.reason = reason


class UnsupportedParameter(XBackendError, ValueError):
    """A variant, tile size or operand that this backend or device cannot run."""


class DeviceOutOfMemory(XBackendError, MemoryError):
    """The operands and result do not fit the device; the message names sizes and memory."""


class KernelCompileError(XBackendError):
    """A kernel failed to compile, with the same report on every backend.

    The message holds the compiler's log, the kernel source with line numbers,
    the build options and the device, so the error can be read without a
    debugger. The driver's own exception is chained as ``__cause__``.
    """

    def __init__(
        self,
        *,
        backend: str,
        path: Path,
        source: str,
        options: Sequence[str],
        device: str,
        log: str,
    ):
        numbered = "\n".join(
            f"{number:4d} | {line}" for number, line in enumerate(source.splitlines(), start=1)
        )
        super().__init__(
            f"{backend}: {path.name} failed to compile for {device}\n"
            f"options: {' '.join(options) or '(none)'}\n"
            f"--- compiler log ---\n{log.strip()}\n"
            f"--- {path} ---\n{numbered}"
        )
        self.backend = backend
        self.path = path
        self.options = list(options)
        self.device = device
        self.log = log
