"""The plugin interface in one import: the records, the classes and the registry.

Each name lives in the module of its concern (``specs``, ``interface``,
``operands``, ``registry``); this module gathers the ones that users of the
interface and third-party backends import, so that ``xbackend.backends.base``
keeps working as the place to import them from.
"""

from __future__ import annotations

from xbackend.backends.choices import ChoiceRequest, Choices
from xbackend.backends.interface import Backend, Execution
from xbackend.backends.kernels import read_kernel
from xbackend.backends.operands import (
    MAX_ELEMENTS,
    SUPPORTED_DTYPES,
    check_operands,
    poison_value,
    row_major_span,
)
from xbackend.backends.registry import (
    BUILTIN,
    ENTRY_POINT_GROUP,
    backend_class,
    backend_names,
    backends,
    get_backend,
)
from xbackend.backends.specs import (
    BackendInfo,
    DeviceInfo,
    Measurement,
    VariantSpec,
    VariantTable,
)

__all__ = [
    "BUILTIN",
    "ENTRY_POINT_GROUP",
    "MAX_ELEMENTS",
    "SUPPORTED_DTYPES",
    "Backend",
    "BackendInfo",
    "ChoiceRequest",
    "Choices",
    "DeviceInfo",
    "Execution",
    "Measurement",
    "VariantSpec",
    "VariantTable",
    "backend_class",
    "backend_names",
    "backends",
    "check_operands",
    "get_backend",
    "poison_value",
    "read_kernel",
    "row_major_span",
]
