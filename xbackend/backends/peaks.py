"""A device's peaks: the most it could compute and read per second, to catch impossible times.

A timed point faster than its device's peak did not happen that way: the timer missed
part of the work. ``peaks`` derives generous upper bounds from what ``DeviceInfo``
says, and ``peak_flags`` names the points that beat them by more than ``TOLERANCE``.
The bounds are meant never to flag an honest number, so where unsure they take the
larger figure, and where a device is not known well enough they are None (no check).

What ``peaks`` reads (the backends put it in ``DeviceInfo``):

* ``compute_units``: SMs on an NVIDIA GPU, compute units on another OpenCL device,
  logical cores on a CPU.
* ``extra["clock_mhz"]``: the highest core clock the API reports (CUDA's
  ``CLOCK_RATE`` / 1000, OpenCL's ``max_clock_frequency``, a CPU's maximum frequency).
  ``extra["max_clock_mhz"]``, where known (NVML's maximum SM clock), is used when it is
  higher: GeForce boards boost above the clock CUDA reports.
* ``extra["compute_capability"]`` ("9.0"): CUDA, and NVIDIA's OpenCL through
  ``cl_nv_device_attribute_query``. Without it an NVIDIA device is bounded as any GPU.
* ``extra["memory_clock_mhz"]`` and ``extra["memory_bus_bits"]`` (CUDA): the DRAM
  bandwidth, 2 × clock × bus width (double data rate). Other devices: unknown.
* ``extra["cublas_math_environment"]`` (CUDA): variables that let cuBLAS compute float
  GEMMs on tensor cores (TF32, emulation), far above any CUDA-core peak: the compute
  peak of the dtypes concerned is then unknown.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from xbackend.launches.specs import DeviceInfo

# A point more than 5% above a peak is flagged: the device and host timers agree to
# under 1%, and the peaks are generous already.
TOLERANCE = 1.05
COMPUTE_FLAG = "above-peak-compute"  # results.records.FLAGS names them
BANDWIDTH_FLAG = "above-peak-bandwidth"

# NVIDIA: lanes per SM (one fused multiply-add each per clock, two operations), by
# compute capability, "major.minor" first, then "major". Int32 counts as float32
# (integer multiply-add is at most as fast on every generation).
FP32_LANES: dict[str, int] = {
    "3": 192,  # Kepler
    "5": 128,  # Maxwell
    "6.0": 64,  # P100
    "6": 128,  # other Pascal
    "7": 64,  # Volta, Turing
    "8.0": 64,  # A100
    "8": 128,  # GA10x, Orin, Ada
    "9": 128,  # Hopper
    "10": 128,  # Blackwell
    "11": 128,
    "12": 128,
}
# Float64 lanes per SM. A100 and H100 run cuBLAS's DGEMM on FP64 tensor cores at twice
# their vector rate (A100 19.5 TFLOP/s, H100 SXM 67), so those count: 8.0 and 9.0 are
# the tensor cores' rate. Others: float32 lanes / 32 (the consumer ratio, 1/64 on
# Ampere and later, rounded up to be generous).
FP64_LANES: dict[str, int] = {
    "3": 64,  # GK110's rate, taken for every Kepler
    "6.0": 32,
    "7.0": 32,
    "7.2": 32,
    "8.0": 64,  # DMMA: 2 × the 32 vector lanes
    "9.0": 128,  # DMMA: 2 × the 64 vector lanes
    "10": 64,
}
# Operations per clock of one CPU core (logical: SMT counts twice, which is generous
# again): two 512-bit FMA units give 64 float32; twice that covers matrix units next
# to the cores (Apple's AMX/SME, which Accelerate's BLAS uses) and an OpenCL runtime
# that reports the base clock, not the turbo one.
CPU_OPS_PER_CYCLE = {"float32": 128, "float64": 64, "int32": 128}
# Operations per clock of one compute unit of a GPU other than a known NVIDIA one: an
# AMD CU does 128 float32 (256 dual-issued on RDNA3, as MI300's vector rate), an Apple
# GPU core 256, an NVIDIA SM at most 384 (Kepler); Intel reports EUs (16 to 32).
GPU_UNIT_OPS_PER_CYCLE = 512
_TENSOR_ENVIRONMENT = {
    "NVIDIA_TF32_OVERRIDE": ("float32",),
    "CUBLAS_EMULATE_SINGLE_PRECISION": ("float32",),
    "CUBLAS_EMULATE_DOUBLE_PRECISION": ("float64",),
}


@dataclasses.dataclass(frozen=True)
class Peaks:
    """A device's upper bounds for one dtype, and how they were derived."""

    flops_per_s: float | None  # the compute peak for this dtype, None if unknown
    bytes_per_s: float | None  # DRAM bandwidth, None if unknown
    how: str  # e.g. "132 SMs × 128 FP32 lanes × 2 × 1980 MHz = 66.9 TFLOP/s; ..."


def _positive(value: Any) -> float | None:
    """A positive finite number from an ``extra`` entry (a number or its text), else None."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if 0 < number < math.inf else None


def _clock_mhz(extra: Mapping[str, Any]) -> float | None:
    clocks = [_positive(extra.get(key)) for key in ("clock_mhz", "max_clock_mhz")]
    known = [clock for clock in clocks if clock is not None]
    return max(known) if known else None


def _capability(value: Any) -> tuple[str, str] | None:
    """("9.0", "9") from "9.0", (9, 0) or 9.0; None for anything else."""
    if isinstance(value, list | tuple) and len(value) == 2:
        value = f"{value[0]}.{value[1]}"
    major, dot, minor = str(value).strip().partition(".")
    if not (major.isdigit() and dot and minor.isdigit()):
        return None
    return f"{int(major)}.{int(minor)}", str(int(major))


def _lookup(table: Mapping[str, int], capability: tuple[str, str]) -> int | None:
    full, major = capability
    return table.get(full, table.get(major))


def _nvidia_lanes(capability: tuple[str, str], dtype: str) -> tuple[int, str] | None:
    """Lanes per SM and their name, for a dtype on a compute capability we know."""
    fp32 = _lookup(FP32_LANES, capability)
    if fp32 is None:
        return None
    if dtype == "float64":
        fp64 = _lookup(FP64_LANES, capability)
        return max(fp64 or 0, math.ceil(fp32 / 32)), "FP64 lanes"
    return fp32, "FP32 lanes" if dtype == "float32" else "int32 lanes (as FP32)"


def _tensor_environment(extra: Mapping[str, Any], dtype: str) -> str | None:
    """The variable that may put this dtype's cuBLAS GEMMs on tensor cores, or None."""
    environment = extra.get("cublas_math_environment")
    if not isinstance(environment, Mapping):
        return None
    for name, value in environment.items():
        if name == "NVIDIA_TF32_OVERRIDE" and str(value).strip() == "0":
            continue  # forbids TF32: no faster
        concerned = _TENSOR_ENVIRONMENT.get(name, ("float32", "float64"))
        if dtype in concerned:
            return f"{name}={value}"
    return None


def _rate(value: float, unit: str) -> str:
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def _compute_peak(device: DeviceInfo, dtype: str) -> tuple[float | None, str]:
    """The compute peak in operations per second, or None, and how it was derived."""
    units, clock = device.compute_units, _clock_mhz(device.extra)
    if dtype not in CPU_OPS_PER_CYCLE:
        return None, f"compute: no peak known for {dtype}"
    if not units or units < 1 or clock is None:
        return None, "compute: unknown (no compute units or no clock)"
    capability = _capability(device.extra.get("compute_capability"))
    if "nvidia" in device.vendor.lower() and capability is not None:
        tensor = _tensor_environment(device.extra, dtype)
        if tensor is not None:
            return None, f"compute: unknown ({tensor}: cuBLAS may use tensor cores)"
        lanes = _nvidia_lanes(capability, dtype)
        if lanes is None:
            return None, f"compute: unknown (compute capability {capability[0]})"
        per_unit, what = lanes
        flops = units * per_unit * 2 * clock * 1e6
        how = f"{units} SMs × {per_unit} {what} × 2 × {clock:g} MHz"
    elif device.kind == "cpu":
        per_core = CPU_OPS_PER_CYCLE[dtype]
        flops = units * per_core * clock * 1e6
        how = f"{units} cores × {per_core} {dtype} operations/cycle × {clock:g} MHz"
    else:
        per_unit = GPU_UNIT_OPS_PER_CYCLE
        flops = units * per_unit * clock * 1e6
        how = f"{units} compute units × {per_unit} operations/cycle × {clock:g} MHz"
    return flops, f"compute: {how} = {_rate(flops, 'FLOP/s')}"


def _bandwidth_peak(device: DeviceInfo) -> tuple[float | None, str]:
    """DRAM bandwidth in bytes per second (NVIDIA, through CUDA), or None."""
    clock = _positive(device.extra.get("memory_clock_mhz"))
    bits = _positive(device.extra.get("memory_bus_bits"))
    if "nvidia" not in device.vendor.lower() or clock is None or bits is None:
        return None, "memory: unknown"
    bandwidth = 2 * clock * 1e6 * bits / 8
    return bandwidth, f"memory: 2 × {clock:g} MHz × {bits:g} bits / 8 = {_rate(bandwidth, 'B/s')}"


def peaks(device: DeviceInfo, dtype: np.dtype[Any] | type | str) -> Peaks:
    """The device's compute peak for ``dtype`` and its DRAM bandwidth, each None if unknown.

    NVIDIA (a compute capability known): SMs × lanes per SM × 2 × clock. A CPU: logical
    cores × ``CPU_OPS_PER_CYCLE`` × clock. Any other device: compute units ×
    ``GPU_UNIT_OPS_PER_CYCLE`` × clock. No clock, no peak.
    """
    name = np.dtype(dtype).name
    compute, compute_how = _compute_peak(device, name)
    bandwidth, bandwidth_how = _bandwidth_peak(device)
    return Peaks(compute, bandwidth, f"{compute_how}; {bandwidth_how}")


def peak_flags(peaks: Peaks, flops: int, min_bytes: int, kernel_s: float, cache: str) -> list[str]:
    """The flags of a point whose kernel took ``kernel_s`` seconds (one launch).

    "above-peak-compute" when ``flops / kernel_s`` beats the compute peak by more than
    ``TOLERANCE``, and for a time that is not positive (no kernel takes no time).

    "above-peak-bandwidth" when ``min_bytes / kernel_s`` beats the DRAM bandwidth by
    more than ``TOLERANCE``, and only for a cold cache (``cache == "cold"``): a warm or
    hot cache legitimately serves operands that fit in it faster than DRAM can.
    ``min_bytes`` should count what must come from DRAM after a flush: the operands
    read (A and B, once each). The output can stay in a write-back cache past the
    kernel's end, so counting it (``Operation.min_bytes``) can flag an honest point
    whose output fits in the last-level cache and dwarfs its inputs (K of a few).

    An unknown peak (None) checks nothing.
    """
    if not kernel_s > 0:  # zero, negative or NaN
        return [COMPUTE_FLAG]
    flags = []
    if peaks.flops_per_s is not None and flops / kernel_s > TOLERANCE * peaks.flops_per_s:
        flags.append(COMPUTE_FLAG)
    bandwidth = peaks.bytes_per_s
    if cache == "cold" and bandwidth is not None and min_bytes / kernel_s > TOLERANCE * bandwidth:
        flags.append(BANDWIDTH_FLAG)
    return flags
