"""Peaks of known devices, and the flags of points that beat them (and of those that don't)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from xbackend.backends.peaks import (
    BANDWIDTH_FLAG,
    COMPUTE_FLAG,
    TOLERANCE,
    Peaks,
    peak_flags,
    peaks,
)
from xbackend.launches.specs import DeviceInfo
from xbackend.results.records import FLAGS, IMPOSSIBLE

H100_EXTRA = {
    "compute_capability": "9.0",
    "clock_mhz": 1980,
    "memory_clock_mhz": 2619,
    "memory_bus_bits": 5120,
}
H100 = DeviceInfo(
    name="NVIDIA H100 80GB HBM3", vendor="NVIDIA", kind="gpu", compute_units=132, extra=H100_EXTRA
)
H100_FP32 = 132 * 128 * 2 * 1980e6  # 66.9 TFLOP/s, NVIDIA's figure for the SXM part
H100_BYTES = 2 * 2619e6 * 5120 / 8  # 3.35 TB/s
A100 = DeviceInfo(
    name="A100",
    vendor="NVIDIA",
    kind="gpu",
    compute_units=108,
    extra={"compute_capability": "8.0", "clock_mhz": 1410},
)
F32, F64, I32 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int32)
SIZE = 2 * 8192**3  # flops of an 8192³ product


def _gpu(cc: str, sms: int, clock: object, **extra: object) -> DeviceInfo:
    fields = {"compute_capability": cc, "clock_mhz": clock, **extra}
    return DeviceInfo(name="gpu", vendor="NVIDIA", kind="gpu", compute_units=sms, extra=fields)


def test_the_h100s_peaks_are_its_data_sheets():
    found = peaks(H100, F32)
    assert found.flops_per_s == pytest.approx(H100_FP32)
    assert 66.8e12 < H100_FP32 < 67.0e12
    assert found.bytes_per_s == pytest.approx(H100_BYTES) and 3.35e12 < H100_BYTES < 3.36e12
    assert "132 SMs × 128 FP32 lanes × 2 × 1980 MHz" in found.how
    assert "66.9 TFLOP/s" in found.how and "3.35 TB/s" in found.how
    assert peaks(H100, I32).flops_per_s == pytest.approx(H100_FP32)  # int32 as FP32 lanes


def test_float64_counts_the_tensor_cores_that_cublas_dgemm_uses():
    # H100 SXM: 67 TFLOP/s FP64 tensor core (34 without): an honest cuBLAS DGEMM at
    # 55 TFLOP/s must not be flagged.
    assert peaks(H100, F64).flops_per_s == pytest.approx(132 * 128 * 2 * 1980e6)
    assert peak_flags(peaks(H100, F64), SIZE, 0, SIZE / 55e12, "warm") == []
    assert peaks(A100, F64).flops_per_s == pytest.approx(19.49e12, rel=1e-3)  # 19.5 TC
    assert peaks(A100, F32).flops_per_s == pytest.approx(19.49e12, rel=1e-3)  # 19.5 FP32
    # A consumer Ampere: FP64 at 1/64 of FP32, bounded generously at 1/32.
    rtx = _gpu("8.6", 82, 1695)
    assert peaks(rtx, F64).flops_per_s == pytest.approx(82 * 4 * 2 * 1695e6)
    assert peaks(rtx, F32).flops_per_s == pytest.approx(82 * 128 * 2 * 1695e6)  # 35.6 TF


@pytest.mark.parametrize(
    ("cc", "fp32", "fp64"),
    [("6.0", 64, 32), ("6.1", 128, 4), ("7.0", 64, 32), ("7.5", 64, 2), ("8.9", 128, 4),
     ("10.0", 128, 64), ("12.0", 128, 4), ("3.5", 192, 64), ("5.2", 128, 4)],
)  # fmt: skip
def test_lanes_per_sm_follow_the_compute_capability(cc, fp32, fp64):
    device = _gpu(cc, 10, 1000)
    assert peaks(device, F32).flops_per_s == pytest.approx(10 * fp32 * 2 * 1e9)
    assert peaks(device, F64).flops_per_s == pytest.approx(10 * fp64 * 2 * 1e9)


def test_a_point_is_flagged_only_above_the_tolerance():
    found = peaks(H100, F32)
    just_under = SIZE / (H100_FP32 * (TOLERANCE - 0.01))
    just_over = SIZE / (H100_FP32 * (TOLERANCE + 0.01))
    assert peak_flags(found, SIZE, 0, SIZE / H100_FP32, "warm") == []  # exactly the peak
    assert peak_flags(found, SIZE, 0, just_under, "warm") == []
    assert peak_flags(found, SIZE, 0, just_over, "warm") == [COMPUTE_FLAG]


def test_bandwidth_is_checked_only_with_a_cold_cache():
    found = peaks(H100, F32)
    flops, inputs = 2 * 8192 * 8192, (8192 * 8192 + 8192) * 4  # 8192² · 8192×1, memory-bound
    twice_dram = inputs / (2 * H100_BYTES)  # only a cache could serve them this fast
    assert peak_flags(found, flops, inputs, twice_dram, "cold") == [BANDWIDTH_FLAG]
    for cache in ("warm", "hot", ""):
        assert peak_flags(found, flops, inputs, twice_dram, cache) == []
    at_dram = inputs / (H100_BYTES * (TOLERANCE - 0.01))
    assert peak_flags(found, flops, inputs, at_dram, "cold") == []


def test_both_flags_at_once():
    found = Peaks(flops_per_s=1e12, bytes_per_s=1e11, how="made up")
    assert peak_flags(found, 10**12, 10**11, 0.5, "cold") == [COMPUTE_FLAG, BANDWIDTH_FLAG]


@pytest.mark.parametrize("kernel_s", [0.0, -1e-3, math.nan])
def test_an_impossible_time_is_flagged_whatever_the_peaks(kernel_s):
    unknown = Peaks(None, None, "nothing known")
    assert peak_flags(unknown, SIZE, 0, kernel_s, "warm") == [COMPUTE_FLAG]


@pytest.mark.parametrize(
    ("device", "dtype"),
    [
        (DeviceInfo(name="gpu", vendor="NVIDIA", compute_units=132), F32),  # no clock
        (_gpu("9.0", 0, 1980), F32),  # no SMs
        (_gpu("13.0", 132, 1980), F32),  # a generation after this table
        (H100, np.dtype(np.float16)),  # no peak known for the dtype
        (_gpu("9.0", 132, 1980, cublas_math_environment={"NVIDIA_TF32_OVERRIDE": "1"}), F32),
        (
            _gpu("9.0", 132, 1980, cublas_math_environment={"CUBLAS_EMULATION_STRATEGY": "eager"}),
            F64,
        ),
        (DeviceInfo(name="cpu", vendor="arm64", kind="cpu", compute_units=10), F32),
    ],
)
def test_what_is_unknown_flags_nothing(device, dtype):
    found = peaks(device, dtype)
    assert found.flops_per_s is None and found.how
    assert peak_flags(found, SIZE, 0, 1e-9, "warm") == []  # a petaflop per second


def test_tensor_core_switches_touch_only_their_dtype():
    off = _gpu("9.0", 132, 1980, cublas_math_environment={"NVIDIA_TF32_OVERRIDE": "0"})
    assert peaks(off, F32).flops_per_s == pytest.approx(H100_FP32)  # TF32 forbidden
    tf32 = _gpu("9.0", 132, 1980, cublas_math_environment={"NVIDIA_TF32_OVERRIDE": "1"})
    assert "NVIDIA_TF32_OVERRIDE=1" in peaks(tf32, F32).how
    assert peaks(tf32, F64).flops_per_s == pytest.approx(132 * 128 * 2 * 1980e6)


def test_bandwidth_needs_an_nvidia_memory_clock_and_bus():
    assert peaks(A100, F32).bytes_per_s is None  # no memory clock given
    amd = DeviceInfo(name="gfx", vendor="AMD", kind="gpu", compute_units=96, extra={**H100_EXTRA})
    assert peaks(amd, F32).bytes_per_s is None
    text = _gpu("9.0", 132, "1980", memory_clock_mhz="2619", memory_bus_bits="5120")
    assert peaks(text, F32).bytes_per_s == pytest.approx(H100_BYTES)  # numbers as text


def test_a_higher_max_clock_raises_the_peak():
    # A GeForce boosts above the clock CUDA reports; NVML's max SM clock knows better.
    rtx4090 = _gpu("8.9", 128, 2520, max_clock_mhz=3105)
    assert peaks(rtx4090, F32).flops_per_s == pytest.approx(128 * 128 * 2 * 3105e6)
    assert peaks(_gpu("8.9", 128, 2520, max_clock_mhz=1000), F32).flops_per_s == pytest.approx(
        128 * 128 * 2 * 2520e6
    )


def test_cpus_and_other_gpus_get_generous_bounds():
    # 8 AVX-512 cores, 16 threads, at their true peak: 8 × 64 × 3.5 GHz.
    cpu = DeviceInfo(
        name="x", vendor="x86_64", kind="cpu", compute_units=16, extra={"clock_mhz": 3500}
    )
    found = peaks(cpu, F32)
    assert found.flops_per_s == pytest.approx(16 * 128 * 3500e6)
    assert found.bytes_per_s is None and "16 cores" in found.how
    assert peak_flags(found, SIZE, 0, SIZE / (8 * 64 * 3500e6), "cold") == []
    assert peaks(cpu, F64).flops_per_s == pytest.approx(16 * 64 * 3500e6)
    # MI300X through OpenCL: 304 CUs at 2100 MHz, 163.4 TFLOP/s float32 (and float64 matrix).
    mi300 = DeviceInfo(
        name="gfx942",
        vendor="Advanced Micro Devices, Inc.",
        kind="gpu",
        compute_units=304,
        extra={"clock_mhz": 2100},
    )
    for dtype in (F32, F64, I32):
        assert peak_flags(peaks(mi300, dtype), SIZE, 0, SIZE / 163.4e12, "warm") == []
    # An NVIDIA device through OpenCL without its compute capability: bounded as any GPU.
    plain = DeviceInfo(
        name="H100",
        vendor="NVIDIA Corporation",
        kind="gpu",
        compute_units=132,
        extra={"clock_mhz": 1980},
    )
    assert peaks(plain, F32).flops_per_s == pytest.approx(132 * 512 * 1980e6)


def test_honest_rates_are_never_flagged_and_faster_ones_always():
    rng = np.random.default_rng(20261122)
    devices = [H100, A100, _gpu("8.6", 82, 1695), _gpu("7.5", 40, 1545)]
    for device in devices:
        for dtype in (F32, F64, I32):
            found = peaks(device, dtype)
            assert found.flops_per_s is not None
            for share in rng.uniform(0.01, 1.0, size=50):
                kernel_s = SIZE / (share * found.flops_per_s)
                assert peak_flags(found, SIZE, 0, kernel_s, "cold") == []
            for excess in rng.uniform(TOLERANCE + 1e-6, 100.0, size=50):
                kernel_s = SIZE / (excess * found.flops_per_s)
                assert peak_flags(found, SIZE, 0, kernel_s, "warm") == [COMPUTE_FLAG]


def test_the_flags_are_the_records_flags():
    assert {COMPUTE_FLAG, BANDWIDTH_FLAG} == set(IMPOSSIBLE) <= set(FLAGS)
