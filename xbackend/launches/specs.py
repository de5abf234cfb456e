"""The records of the plugin interface: a device, a backend, a variant and a measurement."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from xbackend.families.variant import VariantSpec, VariantTable
from xbackend.measuring.timing import unmarked
from xbackend.measuring.verified import WrongRun

__all__ = ["BackendInfo", "DeviceInfo", "Measurement", "VariantSpec", "VariantTable"]


@dataclasses.dataclass(frozen=True)
class DeviceInfo:
    """What a results file needs to know about the device a number came from."""

    name: str
    vendor: str = ""
    kind: str = ""  # "gpu", "cpu", "accelerator"
    platform: str = ""
    driver_version: str = ""
    runtime_version: str = ""
    global_mem_bytes: int | None = None
    max_alloc_bytes: int | None = None  # largest single buffer, where the API says
    compute_units: int | None = None
    local_mem_bytes: int | None = None  # shared memory per block / local memory
    # The most a block may ask for at launch, past what it may declare (CUDA's opt-in
    # dynamic shared memory, 227 KB on an H100); None: local_mem_bytes is all.
    local_mem_opt_in_bytes: int | None = None
    cache_bytes: int | None = None
    max_work_group_size: int | None = None
    # 32-bit registers of one multiprocessor, where the API says (CUDA, NVIDIA's
    # OpenCL): the tuned variants' untuned default is derived from them (warp.py).
    registers: int | None = None
    # The preferred vector width for floats, where the API says (OpenCL): how a
    # processor's compiler vectorizes (1: across work-items; see warp.processor_config).
    vector_width: int | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class BackendInfo:
    """One line of ``xbackend.backends()``."""

    name: str
    available: bool
    reason: str
    devices: list[DeviceInfo]


@dataclasses.dataclass
class Measurement:
    """What one measured product gives back to the runner."""

    result: np.ndarray[Any, Any]  # output of the first run, into a NaN-poisoned buffer
    last_result: np.ndarray[Any, Any]  # output of the last timed sample, poisoned likewise
    kernel_s: list[float]  # device-clock time of the kernel alone, one per sample
    end_to_end_s: list[float]  # host-clock time of upload + kernel + download
    tile: int | None
    params: dict[str, int] | None = None  # every launch parameter, for tuned variants
    launches: int = 1  # back-to-back launches per sample; kernel_s is per launch
    stop: str = ""  # why sampling stopped (timing.STOP_REASONS); "" without samples
    marks: list[str] = dataclasses.field(default_factory=list)  # per sample, "" kept
    clock: str = "host"  # what timed the kernel
    # Where the kernels timed themselves ("globaltimer"), per sample: the API's clock
    # per launch (its excess over kernel_s is the launch overhead), and a batch's mean
    # gap between launches on the device; empty elsewhere.
    api_s: list[float] = dataclasses.field(default_factory=list)
    gap_s: list[float] = dataclasses.field(default_factory=list)
    cpu_s: list[float] = dataclasses.field(default_factory=list)  # a CPU device's CPU time
    cache: str = "warm"  # timing.CACHE_MODES
    host_memory: str = "pageable"  # "pageable", "pinned", "" where nothing is copied
    state: dict[str, Any] | None = None  # the device's clocks and temperature (NVML)
    host_load: dict[str, Any] | None = None  # other processes' share of the host (host_load.py)
    # Given a ``verify`` (``Backend.measure``): the outputs after the first it verified, and
    # the first of them it found wrong (sampler.py).
    verified: int = 0
    wrong: WrongRun | None = None

    @property
    def kept(self) -> tuple[list[float], list[float]]:
        """The kernel and end-to-end samples the statistics are made of (not marked)."""
        return unmarked(self.kernel_s, self.marks), unmarked(self.end_to_end_s, self.marks)
