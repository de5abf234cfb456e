"""The OpenCL backend: the kernel families' .cl files through PyOpenCL, on any OpenCL device.

Devices are chosen by a selector: an index into the list of every device of
every platform (``xbackend devices`` prints it), or a case-insensitive piece of
the platform's name or vendor, the device name or its kind (``"nvidia"``,
``"pocl"``, ``"intel"``, ``"cpu"``, ``"gpu"``). The default is the first GPU, else the first device.

Kernel times come from OpenCL profiling events on a queue created with
profiling enabled. Tile sizes reach the compiler as ``-D TILE=…``, so PyOpenCL's
binary cache keeps one entry per configuration and device.

A machine with no OpenCL driver can still run this backend on its CPU: the
``cpu-opencl`` extra installs Intel's CPU runtime from PyPI, and ``_register_pip_runtimes``
points the ICD loader at it (see there).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shlex
import shutil
import sysconfig
import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from xbackend.backends import opencl_build
from xbackend.backends.compiled import CompiledBackend, index_environment
from xbackend.backends.execution import Device
from xbackend.backends.opencl_device import ClDevice
from xbackend.backends.runtime_faults import fault_of
from xbackend.backends.vendor import check_library
from xbackend.errors import KernelCompileError, UnsupportedParameter, XBackendError
from xbackend.launches.kernels import STAMP, include_folders, read_kernel
from xbackend.launches.launch import KernelLaunch, LibraryCall, Product
from xbackend.launches.specs import DeviceInfo
from xbackend.resources import user_cache_dir

try:
    import pyopencl as cl
except ImportError as error:  # pragma: no cover - pyopencl is a dependency
    cl = None  # type: ignore[assignment]
    _IMPORT_ERROR: ImportError | None = error
else:
    _IMPORT_ERROR = None

# Extra OpenCL build options, e.g. "-cl-opt-disable" (the oclgrind tests use it:
# oclgrind 21.10 cannot interpret the `freeze` instructions LLVM's optimizer emits).
BUILD_OPTIONS_ENV = "XBACKEND_OPENCL_OPTIONS"
# Set this to anything to leave the ICD loader's configuration alone.
NO_PIP_RUNTIME_ENV = "XBACKEND_NO_PIP_OPENCL"
# Libraries of intel-cmplr-lib-rt that libintelocl.so needs but cannot find by itself
# (pip installs them next to it, in a folder the dynamic loader does not search).
_INTEL_DEPENDENCIES = ("libintlc.so.5", "libimf.so", "libsvml.so", "libirng.so")
_PIP_ICD = "xbackend-pip-intel-cpu.icd"
# What _extra_options builds to try the options of BUILD_OPTIONS_ENV: kernels/opencl/probe.cl.
_PROBE_FAMILY = "probe"
_registered = False
# Why the pip runtime is installed but could not be registered, or None: a cache folder
# that cannot be written would otherwise read as "no driver" (see available).
_registration_problem: str | None = None


def _register_pip_runtimes() -> None:
    """Make an OpenCL runtime installed by pip visible to the ICD loader.

    ``pip install intel-opencl-rt`` puts ``libintelocl.so`` into ``<prefix>/lib``
    and an ICD file whose path is a placeholder, so the loader never finds it.
    If that library is here, we preload its dependencies (so that ``dlopen``
    resolves them by name) and point ``OCL_ICD_VENDORS`` at a folder with the
    system's own ICD files plus one for the pip runtime (see ``_vendors_folder``).
    This must run before the loader's first ``clGetPlatformIDs``; it runs once,
    when the backend is first asked anything. Drivers installed system-wide
    (NVIDIA, PoCL, ...) stay visible. Where the runtime is there but cannot be
    registered (a broken install, a cache folder that cannot be written), the loader's
    configuration is left as it was and ``_registration_problem`` says why and where.
    """
    global _registered, _registration_problem
    if _registered or os.environ.get(NO_PIP_RUNTIME_ENV):
        return
    _registered = True
    library = _pip_runtime_library()
    if library is None:
        return
    try:
        for dependency in _INTEL_DEPENDENCIES:
            ctypes.CDLL(str(library.parent / dependency), mode=ctypes.RTLD_GLOBAL)
    except OSError as error:  # a broken install
        _registration_problem = f"its libraries next to {library} do not load ({error})"
        return
    system_vendors = Path(os.environ.get("OCL_ICD_VENDORS", "/etc/OpenCL/vendors"))
    try:
        icds = {}
        if system_vendors.is_dir():
            icds = {icd.name: icd.read_text() for icd in sorted(system_vendors.glob("*.icd"))}
    except OSError as error:
        _registration_problem = f"the ICD files of {system_vendors} cannot be read ({error})"
        return
    icds[_PIP_ICD] = f"{library}\n"
    try:
        vendors = _vendors_folder(icds)
    except OSError as error:
        where = error.filename or _vendors_parent()
        _registration_problem = (
            f"its ICD file cannot be written to {_vendors_parent()} ({where}: "
            f"{error.strerror or error}); set XDG_CACHE_HOME to a folder you can write"
        )
        return
    os.environ["OCL_ICD_VENDORS"] = str(vendors)


def _vendors_parent() -> Path:
    """The cache folder that holds the ICD folders ``_vendors_folder`` makes."""
    return user_cache_dir() / "OpenCL"


def _pip_runtime_library() -> Path | None:
    """Intel's CPU runtime where pip installed it, or None."""
    prefixes = {sysconfig.get_path("data"), sysconfig.get_config_var("base") or ""}
    libraries = [Path(p) / "lib" / "libintelocl.so" for p in prefixes if p]
    return next((lib for lib in libraries if lib.exists()), None)


def _vendors_folder(icds: Mapping[str, str]) -> Path:
    """A folder of the cache holding exactly the ICD files ``icds`` (name -> text).

    Processes started together each register the runtime while the others' loaders
    may be reading the folder, so a folder is never changed once made: it is named
    by a hash of its files, built under a temporary name and renamed into place
    whole. Of processes racing to make the same one, the first rename wins and the
    others throw their copies away.
    """
    digest = hashlib.sha256()
    for name, text in sorted(icds.items()):
        digest.update(f"{len(name)}:{name}{len(text)}:{text}".encode())
    parent = _vendors_parent()
    folder = parent / f"vendors-{digest.hexdigest()[:16]}"
    if folder.is_dir():
        return folder
    parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=".vendors-", dir=parent))
    try:
        for name, text in icds.items():
            (building / name).write_text(text)
        os.rename(building, folder)
    except OSError:
        shutil.rmtree(building, ignore_errors=True)
        if not folder.is_dir():  # not another process's rename first: a real failure
            raise
    return folder


def _all_devices() -> list[tuple[Any, Any]]:
    """Every (platform, device) pair the ICD loader knows, in a stable order."""
    _register_pip_runtimes()
    pairs: list[tuple[Any, Any]] = []
    for platform in cl.get_platforms():
        try:
            devices = platform.get_devices()
        except cl.Error:  # a platform with no devices raises DEVICE_NOT_FOUND
            continue
        pairs.extend((platform, device) for device in devices)
    return pairs


def _kind(device: Any) -> str:
    types = cl.device_type
    for flag, name in ((types.GPU, "gpu"), (types.CPU, "cpu"), (types.ACCELERATOR, "accelerator")):
        if device.type & flag:
            return name
    return "other"


def _describe(platform: Any, device: Any) -> DeviceInfo:
    return DeviceInfo(
        name=device.name.strip(),
        vendor=device.vendor.strip(),
        kind=_kind(device),
        platform=platform.name.strip(),
        driver_version=device.driver_version,
        runtime_version=device.version,
        global_mem_bytes=device.global_mem_size,
        max_alloc_bytes=device.max_mem_alloc_size,
        compute_units=device.max_compute_units,
        local_mem_bytes=device.local_mem_size,
        cache_bytes=device.global_mem_cache_size,
        max_work_group_size=device.max_work_group_size,
        registers=_nvidia_registers(device),
        vector_width=device.preferred_vector_width_float,
        extra={
            "pyopencl": cl.VERSION_TEXT,
            "fp64": bool(device.double_fp_config),
            **({"clock_mhz": device.max_clock_frequency} if device.max_clock_frequency else {}),
            **_nvidia_facts(device),
            **index_environment(),
        },
    )


def _nvidia_registers(device: Any) -> int | None:
    """The registers of a multiprocessor, as NVIDIA's OpenCL says them: those a block
    may use (cl_nv_device_attribute_query), which CUDA gives per multiprocessor."""
    if "cl_nv_device_attribute_query" not in device.extensions:
        return None
    try:
        return int(device.registers_per_block_nv)
    except (cl.Error, AttributeError):
        return None


def _nvidia_facts(device: Any) -> dict[str, Any]:
    """NVIDIA's OpenCL names the compute capability and the PCI address
    (cl_nv_device_attribute_query), for the peaks and the device monitor."""
    if "cl_nv_device_attribute_query" not in device.extensions:
        return {}
    try:
        major = device.compute_capability_major_nv
        minor = device.compute_capability_minor_nv
        bus, slot = device.pci_bus_id_nv, device.pci_slot_id_nv
    except (cl.Error, AttributeError):
        return {}
    # Written as CUDA writes it (the slot is the device number; measured on an H100:
    # bus 0, slot 6 is CUDA's 0000:00:06.0), so that NVML finds the same GPU.
    return {
        "compute_capability": f"{major}.{minor}",
        "pci_bus_id": f"0000:{bus:02X}:{slot:02X}.0",
    }


def select_device(selector: str | int | None, pairs: list[tuple[Any, Any]]) -> tuple[Any, Any]:
    """The (platform, device) a selector names; see the module docstring."""
    if not pairs:
        raise XBackendError("no OpenCL device found")
    if selector is None:
        gpus = [pair for pair in pairs if _kind(pair[1]) == "gpu"]
        return (gpus or pairs)[0]
    text = str(selector).strip()
    if text.isdigit():
        index = int(text)
        if index < len(pairs):
            return pairs[index]
    else:
        wanted = text.lower()
        for platform, device in pairs:
            described = f"{platform.name} {platform.vendor} {device.name} {_kind(device)}"
            if wanted in described.lower():
                return platform, device
    listing = "; ".join(
        f"{i}: {device.name.strip()} ({platform.name.strip()})"
        for i, (platform, device) in enumerate(pairs)
    )
    raise UnsupportedParameter(f"no OpenCL device matches {selector!r}; devices: {listing}")


class OpenCLBackend(CompiledBackend):
    name = "opencl"
    description = "the kernel families' OpenCL files through PyOpenCL, on any OpenCL device"
    VENDOR_LINES = (
        "CLBlast's GEMM (through pyclblast) on the same buffers, timed on the device "
        "between two markers",
        "the pair sums by a kernel, then CLBlast on the half-size product",
    )
    GROUP_WORDS = ("work-items", "local")
    LANGUAGE = "opencl"

    def __init__(self, device: str | int | None = None):
        available, reason = self.available()
        if not available:
            raise XBackendError(reason)
        platform, cl_device = select_device(device, _all_devices())
        self._device = _describe(platform, cl_device)
        self._cl_device = cl_device
        self._context = cl.Context([cl_device])
        self._queue = cl.CommandQueue(
            self._context, properties=cl.command_queue_properties.PROFILING_ENABLE
        )
        self._handle = ClDevice(self._context, self._queue, self._device.cache_bytes or 0)
        self._programs: dict[tuple[str, tuple[str, ...]], Any] = {}  # (family, options)
        self._accepted_options: set[tuple[str, ...]] = set()  # see _extra_options
        self._kernels: dict[tuple[str, tuple[str, ...], str], Any] = {}

    @classmethod
    def available(cls) -> tuple[bool, str]:
        if cl is None:
            return False, f"pyopencl is not installed ({_IMPORT_ERROR}): pip install pyopencl"
        try:
            found = _all_devices()
        except cl.Error as error:
            found, detail = [], f" ({error})"
        else:
            detail = ""
        if not found and _registration_problem:
            return False, (
                f"no OpenCL platform or device found{detail}: Intel's CPU runtime that pip "
                f"installed could not be registered with the ICD loader: {_registration_problem}"
            )
        if not found:
            return False, (
                f"no OpenCL platform or device found{detail}. Install a driver: "
                "on a CPU, pip install 'xbackend[cpu-opencl]' (Intel's runtime) or "
                "apt-get install pocl-opencl-icd; on an NVIDIA GPU, register the driver with "
                "echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd"
            )
        return True, ""

    @classmethod
    def list_devices(cls) -> list[DeviceInfo]:
        if cl is None:
            return []
        return [_describe(platform, device) for platform, device in _all_devices()]

    @property
    def device(self) -> DeviceInfo:
        return self._device

    def dtype_problem(self, dtype: np.dtype) -> str | None:
        if dtype == np.float64 and not self._device.extra.get("fp64"):
            return f"{self._device.name} has no double precision (cl_khr_fp64)"
        return None

    def _kernel(self, family: str, options: tuple[str, ...], kernel: str, dtype: np.dtype) -> Any:
        """A kernel of a family's file built with ``options`` (and those of
        ``XBACKEND_OPENCL_OPTIONS``, as they are now): compiled once, reused."""
        options = (*options, *self._extra_options())
        key = (family, options, kernel)
        if key not in self._kernels:
            if (family, options) not in self._programs:
                self._programs[family, options] = self._build(family, list(options), dtype)
            # Not checked against CL_KERNEL_WORK_GROUP_SIZE: NVIDIA's driver reports
            # 256 for these kernels, yet runs 32×32 groups correctly (H200, driver
            # 580.159.04). The device limit is checked by tile_problem; a group the
            # kernel cannot take fails at launch, with the driver's reason.
            self._kernels[key] = opencl_build.kernel(self._programs[family, options], kernel)
        return self._kernels[key]

    def _extra_options(self) -> tuple[str, ...]:
        """The build options of ``XBACKEND_OPENCL_OPTIONS``, split as a shell would.

        Each new value is first tried on an empty kernel, so that options the driver
        refuses are an error naming the variable. That trial bypasses PyOpenCL's binary
        cache, whose handling of a refused option fails with a ``KeyError`` of its own
        (``PYOPENCL_CACHE_FAILURE_FATAL``, pyopencl 2026.1).
        """
        text = os.environ.get(BUILD_OPTIONS_ENV, "")
        try:
            extra = tuple(shlex.split(text))
        except ValueError as error:
            raise XBackendError(
                f"{BUILD_OPTIONS_ENV}={text!r} is not a list of build options: {error}"
            ) from error
        if extra and extra not in self._accepted_options:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", cl.CompilerWarning)
                    _, probe = read_kernel(_PROBE_FAMILY, "opencl")
                    program = cl.Program(self._context, probe)
                    # False: no binary cache (pyopencl/cache.py takes it; its hint says str).
                    program.build(options=list(extra), cache_dir=False)  # type: ignore[arg-type]
            except cl.Error as error:
                raise XBackendError(
                    f"{self._device.name} refuses the OpenCL build options of "
                    f"{BUILD_OPTIONS_ENV}={text!r}: {error}"
                ) from error
            self._accepted_options.add(extra)
        return extra

    def _prebuild(self, family: str, options: tuple[str, ...], dtype: np.dtype[Any]) -> None:
        """Build a program as ``_kernel`` would, and keep it for it (the driver builds
        without the interpreter's lock; programs of distinct options do not share)."""
        key = (family, (*options, *self._extra_options()))
        if key not in self._programs:
            self._programs[key] = self._build(family, list(key[1]), dtype)

    def _build(self, family: str, options: list[str], dtype: np.dtype) -> Any:
        path, source = read_kernel(family, "opencl", STAMP in options)
        if dtype == np.float64:
            options.append("-DXB_FP64")
        options += self._ptx_option()
        for include in include_folders(family, "opencl"):
            folder = str(include)
            options += ["-I", f'"{folder}"' if any(c.isspace() for c in folder) else folder]
        try:
            with warnings.catch_warnings():
                # Some runtimes (Intel's) log every successful build; a
                # failed build still reaches the user through the error.
                warnings.simplefilter("ignore", cl.CompilerWarning)
                return opencl_build.build(self._context, source, options)
        except cl.RuntimeError as error:
            extra = os.environ.get(BUILD_OPTIONS_ENV, "")
            note = f"\n(the options include {BUILD_OPTIONS_ENV}={extra!r})" if extra else ""
            raise KernelCompileError(
                backend=self.name,
                path=path,
                source=source,
                options=options,
                device=self._device.name,
                log=opencl_build.file_lines(self._context, source, str(error)) + note,
            ) from error

    def _ptx_option(self) -> list[str]:
        """-DXB_PTX=<major><minor> where the compiler takes inline PTX of that compute
        capability (NVIDIA's GPUs): kernels/mm_warp's ASYNC copies with cp.async there."""
        version = self._ptx_version()
        return [f"-DXB_PTX={version}"] if version else []

    def _ptx_version(self) -> str:
        """The compute capability as PTX names it ("90"), where the compiler builds PTX
        (NVIDIA's GPUs); "" elsewhere."""
        capability = self._device.extra.get("compute_capability")
        return capability.replace(".", "") if capability and self._device_clock() else ""

    def variant_problem(self, variant: str, dtype: np.dtype, op: str = "mm") -> str | None:
        if variant != "vendor":
            problem = super().variant_problem(variant, dtype, op)
            return problem or fault_of(self._device, self.variant_spec(variant, op))
        from xbackend.backends.clblast import Clblast

        available, reason = Clblast.available()
        if not available:
            return reason
        return Clblast.dtype_problem(dtype, self._cl_device)

    def _compile(self, launch: KernelLaunch, dtype: np.dtype[Any]) -> Any:
        return self._kernel(launch.family, launch.options, launch.function, dtype)

    def _ptx(self, launch: KernelLaunch, dtype: np.dtype[Any]) -> tuple[str, str] | None:
        """NVIDIA's OpenCL keeps a program's PTX as its binary; no other runtime here does."""
        version = self._ptx_version()
        if not version:
            return None
        kernel = self._compile(launch, dtype)  # built as a run builds it
        program = kernel.get_info(cl.kernel_info.PROGRAM)
        binary = bytes(program.get_info(cl.program_info.BINARIES)[0]).rstrip(b"\0")
        ptx = binary.decode("utf-8", errors="replace") + "\n"  # NUL-ended: ptxas reads EOF
        return ptx, f"sm_{version}"

    def _device_clock(self) -> bool:
        # NVIDIA's compiler takes the inline PTX that reads %globaltimer; no other does.
        platform = self._cl_device.platform.name
        return "NVIDIA" in platform and self._device.kind == "gpu"

    def _device_handle(self) -> Device:
        return self._handle

    def _check_product(self, product: Product) -> None:
        # CLBlast's kernels offset every element with 32-bit ints: past them it would
        # compute a wrong product, so the vendor line refuses one (the kernels do not).
        for step in product.steps:
            if isinstance(step, LibraryCall):
                check_library("CLBlast", step.args, int32_offsets=True)

    def _is_out_of_memory(self, error: BaseException) -> bool:
        codes = (
            cl.status_code.MEM_OBJECT_ALLOCATION_FAILURE,
            cl.status_code.OUT_OF_HOST_MEMORY,
            cl.status_code.INVALID_BUFFER_SIZE,
        )
        if isinstance(error, cl.Error) and getattr(error, "code", None) in codes:
            return True
        return super()._is_out_of_memory(error)

    def close(self) -> None:
        if self._closed:
            return
        getattr(self, "_kernels", {}).clear()
        getattr(self, "_programs", {}).clear()
        queue = getattr(self, "_queue", None)
        if queue is not None:
            queue.finish()
            self._handle.release()
            # The queue and context go with their last reference: ours.
            del self._queue, self._context, self._handle
        super().close()
