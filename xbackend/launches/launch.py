"""Launches as data: a product is a list of steps on named buffers.

A step is a kernel launch (its kernel, the file and build options it comes from,
its grid and block, and its arguments by name) or a call of the vendor's GEMM.
A product names its inputs (host arrays to upload), its output ``C`` and its
workspaces (the partial products of a split, the pair sums of rmm's vendor line),
which are poisoned like the output. The CUDA and OpenCL backends run products the
same way (``execution.LaunchExecution``); the runtime never knows the algorithm.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from xbackend.errors import XBackendError
from xbackend.launches.kernels import (
    GEMM_PARAMETERS,
    STAMP,
    WIDE_INDEX,
    function_name,
    index_parameters,
    long_parameters,
    parameters,
)

Array = np.ndarray[Any, Any]
OUTPUT = "C"  # the buffer a product's result is downloaded from
# A number argument, as its kernel parameter declares it: an integer as wide as the
# parameter, a float or a double.
Scalar = np.int32 | np.int64 | np.float32 | np.float64


@dataclasses.dataclass(frozen=True)
class Buffer:
    """An argument that is one of the product's device buffers, by name."""

    name: str


# How each kind of field is packed: Python's struct codes in standard sizes (a device
# address is 64 bits), and each one's size, its natural alignment.
_CODES = {"int32": "i", "int64": "q", "float32": "f", "float64": "d", "buffer": "Q"}
_SIZES = {"int32": 4, "int64": 8, "float32": 4, "float64": 8, "buffer": 8}


@dataclasses.dataclass(frozen=True)
class Record:
    """A struct argument passed by value (CUDA): its fields in order, each with its kind
    (``_CODES``) and its value: a number, or a buffer whose device address it holds; and
    the ``#pragma pack`` it is laid out under (0: each field at its natural alignment; N:
    at most N-aligned, as GCC and nvcc lay it out)."""

    fields: tuple[tuple[str, str, Buffer | int | float], ...]
    pragma_pack: int = 0

    def _aligned(self, kind: str) -> int:
        return min(_SIZES[kind], self.pragma_pack) if self.pragma_pack else _SIZES[kind]

    @property
    def format(self) -> str:
        """Its bytes as Python's struct writes them: each field where C puts it, padded
        at the end to its alignment as C pads it."""
        codes, offset = "=", 0
        for _, kind, _ in self.fields:
            pad = -offset % self._aligned(kind)
            codes += f"{pad}x{_CODES[kind]}" if pad else _CODES[kind]
            offset += pad + _SIZES[kind]
        tail = -offset % self.alignment
        return codes + (f"{tail}x" if tail else "")

    @property
    def alignment(self) -> int:
        return max(self._aligned(kind) for _, kind, _ in self.fields)

    @property
    def size(self) -> int:
        return struct.calcsize(self.format)

    def pack(self, address: Callable[[Buffer], int]) -> bytes:
        """Its bytes, each buffer field the device address ``address`` gives."""
        values = [address(v) if isinstance(v, Buffer) else v for _, _, v in self.fields]
        return struct.pack(self.format, *values)


Arg = Buffer | int | float | np.floating[Any] | Record
_SCALARS = {np.int32: "i", np.int64: "q", np.float32: "f", np.float64: "d"}


def packing(values: list[Any]) -> str:
    """A launch's arguments as C lays them out, in Python's struct codes (PyCUDA packs
    a CUDA launch so): "P" a pointer, "i" an int, "q" a 64-bit one, "f" and "d" floats,
    and a struct as its bytes (``Record``), padded to where C puts it."""
    codes = ""
    for value in values:
        if isinstance(value, Record):
            pad = -struct.calcsize(codes) % value.alignment
            codes += f"{pad}x{value.size}s" if pad else f"{value.size}s"
        else:
            codes += "P" if isinstance(value, Buffer) else _SCALARS[type(value)]
    return codes


def _named(routine: str, names: tuple[str, ...], values: dict[str, Arg]) -> dict[str, Arg]:
    """``values`` in the order of ``names``, ``routine``'s parameters; each must be given."""
    missing = [name for name in names if name not in values]
    if missing:
        raise XBackendError(f"{routine} needs the arguments {', '.join(missing)}")
    return {name: values[name] for name in names}


@dataclasses.dataclass(frozen=True)
class KernelLaunch:
    """One kernel launch: ``grid`` groups (blocks) of ``block`` workers each."""

    kernel: str  # the kernel function
    family: str  # the kernel file it lives in
    options: tuple[str, ...]  # build options (-D...)
    grid: tuple[int, int, int]  # groups along x, y, z
    block: tuple[int, int, int]  # workers (threads, work-items) per group along x, y, z
    args: dict[str, Arg]  # in the kernel's parameter order
    dims: int = 3  # the axes an OpenCL launch names (1: x alone; CUDA's grids are 3-D)
    # Shared memory a group asks for at launch, past its declared arrays (CUDA's dynamic
    # shared memory); 0: none.
    shared_bytes: int = 0

    @classmethod
    def of(
        cls,
        kernel: str,
        family: str,
        options: tuple[str, ...],
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        dims: int = 3,
        **args: Arg,
    ) -> KernelLaunch:
        """A launch whose arguments are given by name (those it does not take are left)."""
        return cls.bound(kernel, family, options, grid, block, args, dims)

    @classmethod
    def bound(
        cls,
        kernel: str,
        family: str,
        options: tuple[str, ...],
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        args: Mapping[str, Arg],
        dims: int = 3,
    ) -> KernelLaunch:
        """``of``, its arguments in a mapping: by the kernel's own parameter names."""
        named = _named(kernel, parameters(family, kernel), dict(args))
        return cls(kernel, family, options, grid, block, named, dims)

    @property
    def stamped(self) -> bool:
        """Whether the kernel is built to stamp the device's clock (``STAMP``): its launch
        then also takes the stamps buffer and a slot (execution.StampSlots)."""
        return STAMP in self.options

    @property
    def wide_index(self) -> bool:
        """Whether the kernel is built with 64-bit element offsets (``WIDE_INDEX``)."""
        return WIDE_INDEX in self.options

    @property
    def function(self) -> str:
        """The kernel function's name: ``mm<float>`` is an instance of the template ``mm``."""
        return function_name(self.kernel)

    def values(self) -> list[Buffer | Scalar | Record]:
        """The arguments in the kernel's order, as it takes them: buffers by name, floats
        as planned (of the parameter's type), structs as records, and each integer a
        32-bit int, or a 64-bit one where the parameter is declared so (or ``INDEX`` in a
        wide build). A value its parameter cannot hold is an error, never a wrapped one."""
        wide = index_parameters(self.family, self.kernel) if self.wide_index else frozenset()
        wide |= long_parameters(self.family, self.kernel)  # declared 64-bit: always
        found: list[Buffer | Scalar | Record] = []
        for name, value in self.args.items():
            if isinstance(value, Buffer | Record | np.floating):
                found.append(value)
                continue
            kind = np.int64 if name in wide else np.int32
            limits = np.iinfo(kind)
            if not limits.min <= value <= limits.max:
                raise XBackendError(
                    f"{self.kernel}: {name} = {value} does not fit its {limits.bits}-bit "
                    "parameter (a product planned without the wide index it needs)"
                )
            found.append(kind(value))
        return found

    @property
    def global_size(self) -> tuple[int, ...]:
        """Workers along each of the ``dims`` axes in all: OpenCL's global size."""
        return tuple(g * b for g, b in zip(self.grid, self.block, strict=True))[: self.dims]

    @property
    def local_size(self) -> tuple[int, ...]:
        """Workers per group along each of the ``dims`` axes: OpenCL's local size."""
        return self.block[: self.dims]


@dataclasses.dataclass(frozen=True)
class LibraryCall:
    """The vendor library's GEMM on the product's buffers, arguments by name."""

    routine: str
    args: dict[str, Arg]

    @classmethod
    def gemm(cls, **args: Arg) -> LibraryCall:
        """Row-major C (M×N) = A (M×K) · B (K×N), leading dimensions in elements."""
        return cls("gemm", _named("gemm", GEMM_PARAMETERS, args))


Step = KernelLaunch | LibraryCall


@dataclasses.dataclass(frozen=True)
class Product:
    """Everything one product needs on a device, and what it chose."""

    inputs: dict[str, Array]  # buffer name -> contiguous host array to upload
    output_shape: tuple[int, ...]
    dtype: np.dtype[Any]
    steps: tuple[Step, ...]
    workspaces: dict[str, int] = dataclasses.field(default_factory=dict)  # name -> bytes
    tile: int | None = None  # for tuned variants: what they chose
    params: dict[str, int] | None = None
    # Whether C is stored column-major (``output_shape`` its transpose): turned back when
    # it is read.
    output_turned: bool = False

    @property
    def launches(self) -> tuple[KernelLaunch, ...]:
        return tuple(step for step in self.steps if isinstance(step, KernelLaunch))

    @property
    def calls_library(self) -> bool:
        return any(isinstance(step, LibraryCall) for step in self.steps)

    @property
    def stamped(self) -> bool:
        """Whether every step is a kernel that stamps the device's clock."""
        return bool(self.steps) and all(
            isinstance(step, KernelLaunch) and step.stamped for step in self.steps
        )

    def with_stamps(self) -> Product:
        """The same product, its kernels built to stamp the device's clock (``STAMP``)."""
        steps = tuple(
            dataclasses.replace(step, options=(*step.options, STAMP))
            if isinstance(step, KernelLaunch) and not step.stamped
            else step
            for step in self.steps
        )
        return dataclasses.replace(self, steps=steps)
