"""The registry of backends: the built-in ones, then plugins of an entry-point group.

``BUILTIN`` is the single source of truth for the built-in backends. A backend's
module is imported only when first asked for, and cached; no driver starts at
import time.
"""

from __future__ import annotations

import importlib
from importlib import metadata

from xbackend.backends.interface import Backend
from xbackend.errors import BackendUnavailable, UnsupportedParameter, XBackendError
from xbackend.launches.choices import Choices
from xbackend.launches.specs import BackendInfo

# name -> "module:Class"
BUILTIN: dict[str, str] = {
    "cuda": "xbackend.backends.cuda:CudaBackend",
    "opencl": "xbackend.backends.opencl:OpenCLBackend",
    "cpu": "xbackend.backends.cpu:CpuBackend",
}
ENTRY_POINT_GROUP = "xbackend.backends"

_classes: dict[str, type[Backend]] = {}


def _plugin_targets() -> dict[str, str]:
    return {
        entry.name: entry.value
        for entry in metadata.entry_points(group=ENTRY_POINT_GROUP)
        if entry.name not in BUILTIN
    }


def backend_names() -> list[str]:
    """Every backend name: the built-in ones, then installed plugins."""
    return [*BUILTIN, *_plugin_targets()]


def backend_class(name: str) -> type[Backend]:
    """The class registered under ``name``, imported on first use and cached."""
    if name in _classes:
        return _classes[name]
    target = BUILTIN.get(name) or _plugin_targets().get(name)
    if target is None:
        raise UnsupportedParameter(
            f"unknown backend '{name}'; known backends: {', '.join(backend_names())}"
        )
    module_name, _, class_name = target.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    if not (isinstance(cls, type) and issubclass(cls, Backend)):
        raise XBackendError(f"backend '{name}' ({target}) is not an xbackend Backend")
    _classes[name] = cls
    return cls


def backends() -> list[BackendInfo]:
    """Every known backend: whether it can run here (or why not) and its devices."""
    infos = []
    for name in backend_names():
        try:
            cls = backend_class(name)
            available, reason = cls.available()
            devices = cls.list_devices() if available else []
        except Exception as error:  # a broken plugin must not hide the others
            available, reason, devices = False, f"{type(error).__name__}: {error}", []
        infos.append(BackendInfo(name, available, reason, devices))
    return infos


def open_backend(
    name: str, device: str | int | None = None, *, choices: Choices | None = None
) -> Backend:
    """A ready backend on ``device`` (its default device if None), its tuned variants
    taking their configurations from ``choices`` (see choices.py; None: the defaults).

    Raises ``BackendUnavailable`` with the reason if it cannot run here.
    """
    cls = backend_class(name)
    available, reason = cls.available()
    if not available:
        raise BackendUnavailable(name, reason)
    backend = cls(device) if device is not None else cls()
    if choices is not None:
        backend.use_choices(choices)
    return backend
