"""The device's state while it is measured: clocks, throttling, temperature and power (NVML).

A ``DeviceMonitor`` watches one device for the measurement loop: ``header`` gives the
run-level facts once (name, driver, power limits, persistence, ECC, clocks that were
set), ``start`` opens a point, ``sample`` is called right after each timed sample and
says whether the device was throttling then, ``finish`` gives the point's state
(clocks, temperature, power, the throttle reasons seen) and ``close`` lets go.

On NVIDIA GPUs it reads NVML through the optional ``nvidia-ml-py`` package (imported
as ``pynvml``); everywhere else, and wherever NVML cannot be reached, ``monitor_for``
gives a ``NullMonitor``, which records nothing. A monitor never raises into a
measurement: a read that fails is left out (``None``) and its name listed under
``unread``.

NVML start-up is balanced per monitor: ``monitor_for`` calls ``nvmlInit`` once for each
monitor it makes (and ``nvmlShutdown`` at once if the device is not found there), and
the monitor's first ``close`` calls ``nvmlShutdown`` once. NVML counts initialisations
itself and shuts down only when the count is back to zero, so several monitors (one
per device, or a backend opened twice) live side by side without one closing NVML
under another.
"""

from __future__ import annotations

import abc
import contextlib
import importlib
import statistics
from collections.abc import Callable
from types import TracebackType
from typing import Any, NamedTuple, Protocol


class DeviceInfo(Protocol):
    """What a monitor needs of a device's record (``launches.specs.DeviceInfo``)."""

    @property
    def vendor(self) -> str: ...
    @property
    def extra(self) -> dict[str, Any]: ...


class SampleState(NamedTuple):
    """The device's state right after one timed sample."""

    # The device was slowing its clocks for a reason other than idling or an
    # application/locked clock setting (see THROTTLING).
    throttled: bool
    reasons: tuple[str, ...]  # names of the active throttle reasons, e.g. ("sw_power_cap",)


# NVML's clock event (formerly "throttle") reasons: our name, the suffix of pynvml's
# constant (nvmlClocksEventReason* since driver 535, nvmlClocksThrottleReason* before),
# and the bit NVML documents, for a pynvml that has neither constant.
REASONS: tuple[tuple[str, str, int], ...] = (
    ("gpu_idle", "GpuIdle", 0x1),
    ("applications_clocks", "ApplicationsClocksSetting", 0x2),
    ("sw_power_cap", "SwPowerCap", 0x4),
    ("hw_slowdown", "HwSlowdown", 0x8),
    ("sync_boost", "SyncBoost", 0x10),
    ("sw_thermal", "SwThermalSlowdown", 0x20),
    ("hw_thermal", "HwThermalSlowdown", 0x40),
    ("hw_power_brake", "HwPowerBrakeSlowdown", 0x80),
    ("display_clocks", "DisplayClockSetting", 0x100),
)
# The reasons that make a sample untrustworthy: the device slowed itself down. Idling,
# a clock setting (applications or locked clocks), sync boost and display clocks do not.
THROTTLING = frozenset(
    {"sw_power_cap", "hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake"}
)
_ORDER = {name: index for index, (name, _, _) in enumerate(REASONS)}
# Newest name first: the older one is deprecated and goes with CUDA 14.
_REASON_FUNCTIONS = (
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetCurrentClocksThrottleReasons",
)
_COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}


def reason_bits(nvml: Any) -> dict[str, int]:
    """Each reason's bit, as this pynvml names it (either generation), else as documented."""
    bits = {}
    for name, suffix, documented in REASONS:
        value: Any = getattr(nvml, f"nvmlClocksEventReason{suffix}", None)
        if value is None:
            value = getattr(nvml, f"nvmlClocksThrottleReason{suffix}", documented)
        bits[name] = int(value)
    return bits


def reason_names(mask: int, bits: dict[str, int]) -> tuple[str, ...]:
    """The names of the reasons set in ``mask``; a bit NVML added later reads as hex."""
    names = [name for name, bit in bits.items() if bit and mask & bit == bit]
    known = 0
    for bit in bits.values():
        known |= bit
    rest = mask & ~known
    names += [f"0x{1 << shift:x}" for shift in range(rest.bit_length()) if rest >> shift & 1]
    return tuple(names)


def _ordered(names: set[str]) -> list[str]:
    return sorted(names, key=lambda name: (_ORDER.get(name, len(_ORDER)), name))


class DeviceMonitor(abc.ABC):
    """Watches one device through a run; usable as a ``with`` block (``close`` at its end)."""

    @abc.abstractmethod
    def header(self) -> dict[str, Any]:
        """Run-level facts about the device, for the run header."""

    @abc.abstractmethod
    def start(self) -> None:
        """A point's sampling begins: forget the last point, read temperature and power."""

    @abc.abstractmethod
    def sample(self) -> SampleState:
        """Right after each timed sample: the throttle reasons and clocks (cheap reads)."""

    @abc.abstractmethod
    def finish(self) -> dict[str, Any] | None:
        """The point's state (``PointRecord.state``), or None where nothing is watched."""

    @abc.abstractmethod
    def close(self) -> None:
        """Let go of the device's monitoring; safe to call more than once."""

    def energy_mj(self) -> float | None:
        """The device's energy counter in millijoules (NVML's, since the driver loaded),
        or None where there is none."""
        return None

    def __enter__(self) -> DeviceMonitor:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class NullMonitor(DeviceMonitor):
    """Records nothing: a device NVML does not watch, or no NVML at all."""

    def __init__(self, reason: str = ""):
        self.reason = reason  # why nothing is recorded, for a log line

    def header(self) -> dict[str, Any]:
        return {}

    def start(self) -> None:
        pass

    def sample(self) -> SampleState:
        return SampleState(False, ())

    def finish(self) -> dict[str, Any] | None:
        return None

    def close(self) -> None:
        pass


def _text(value: Any) -> str | None:
    """A string NVML gave (bytes from older pynvml)."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _number(value: Any) -> int | float | None:
    """A number NVML gave, or None for anything else (a read that failed)."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _watts(milliwatts: Any) -> float | None:
    number = _number(milliwatts)
    return None if number is None else number / 1000.0


def _enabled(state: Any) -> bool | None:
    """NVML's enable state (1 enabled); ECC gives [current, pending]: the current one."""
    if isinstance(state, list | tuple):
        state = state[0] if state else None
    return None if state is None else bool(state)


def _compute_mode(mode: Any) -> str | None:
    return None if mode is None else _COMPUTE_MODES.get(mode, str(mode))


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


class NvmlMonitor(DeviceMonitor):
    """One NVIDIA GPU watched through NVML; made by ``monitor_for``."""

    def __init__(self, nvml: Any, handle: Any, pci_bus_id: str):
        self._nvml, self._handle, self._pci_bus_id = nvml, handle, pci_bus_id
        self._bits = reason_bits(nvml)
        self._reason_functions: tuple[str, ...] = _REASON_FUNCTIONS
        self._sm = int(getattr(nvml, "NVML_CLOCK_SM", 1))
        self._mem = int(getattr(nvml, "NVML_CLOCK_MEM", 2))
        self._gpu_sensor = int(getattr(nvml, "NVML_TEMPERATURE_GPU", 0))
        self._closed = False
        self._reset()

    def _reset(self) -> None:
        self._unread: set[str] = set()
        self._sm_mhz: list[float] = []
        self._mem_mhz: list[float] = []
        self._seen: set[str] = set()
        self._samples = self._throttled = 0
        self._temperature_start: int | float | None = None
        self._power_start_mw: Any = None

    def _call(self, unread: set[str], what: str, function: str, *args: Any) -> Any:
        """NVML's answer, or None with ``what`` added to ``unread``.

        Any exception counts as a failed read, not only NVMLError: a function this
        pynvml lacks (AttributeError), a library that went away (OSError), a wrong
        argument type in an old binding. A monitor must never end a measurement.
        """
        if self._closed:
            unread.add(what)
            return None
        try:
            return getattr(self._nvml, function)(*args)
        except Exception:
            unread.add(what)
            return None

    def _device(self, unread: set[str], what: str, function: str, *args: Any) -> Any:
        return self._call(unread, what, function, self._handle, *args)

    def header(self) -> dict[str, Any]:
        unread: set[str] = set()
        sm, mem = self._sm, self._mem
        # (key, NVML function, its arguments after the handle, how to read the answer)
        device_facts: tuple[tuple[str, str, tuple[int, ...], Callable[[Any], Any]], ...] = (
            ("gpu_name", "nvmlDeviceGetName", (), _text),
            ("persistence_mode", "nvmlDeviceGetPersistenceMode", (), _enabled),
            ("ecc_mode", "nvmlDeviceGetEccMode", (), _enabled),
            ("power_limit_w", "nvmlDeviceGetPowerManagementLimit", (), _watts),
            ("enforced_power_limit_w", "nvmlDeviceGetEnforcedPowerLimit", (), _watts),
            ("default_power_limit_w", "nvmlDeviceGetPowerManagementDefaultLimit", (), _watts),
            ("applications_clock_sm_mhz", "nvmlDeviceGetApplicationsClock", (sm,), _number),
            ("applications_clock_mem_mhz", "nvmlDeviceGetApplicationsClock", (mem,), _number),
            ("max_clock_sm_mhz", "nvmlDeviceGetMaxClockInfo", (sm,), _number),
            ("max_clock_mem_mhz", "nvmlDeviceGetMaxClockInfo", (mem,), _number),
            ("compute_mode", "nvmlDeviceGetComputeMode", (), _compute_mode),
        )
        facts: dict[str, Any] = {
            "monitor": "nvml",
            "pci_bus_id": self._pci_bus_id,
            "driver_version": _text(
                self._call(unread, "driver_version", "nvmlSystemGetDriverVersion")
            ),
            "nvml_version": _text(self._call(unread, "nvml_version", "nvmlSystemGetNVMLVersion")),
        }
        for key, function, arguments, read in device_facts:
            facts[key] = read(self._device(unread, key, function, *arguments))
        facts["unread"] = sorted(unread)
        return facts

    def start(self) -> None:
        self._reset()
        self._temperature_start = self._temperature()
        self._power_start_mw = self._device(self._unread, "power", "nvmlDeviceGetPowerUsage")

    def _temperature(self) -> int | float | None:
        sensor = self._gpu_sensor
        return _number(
            self._device(self._unread, "temperature", "nvmlDeviceGetTemperature", sensor)
        )

    def _reasons_mask(self) -> int | None:
        """The active reasons' bits, from whichever generation of the call answers."""
        for function in self._reason_functions:
            mask = _number(self._device(set(), "throttle_reasons", function))
            if isinstance(mask, int):
                self._reason_functions = (function,)  # ask the one that answered from now on
                return mask
        self._unread.add("throttle_reasons")
        return None

    def sample(self) -> SampleState:
        mask = self._reasons_mask()
        reasons = () if mask is None else reason_names(mask, self._bits)
        for values, what, clock in (
            (self._sm_mhz, "sm_clock", self._sm),
            (self._mem_mhz, "mem_clock", self._mem),
        ):
            mhz = _number(self._device(self._unread, what, "nvmlDeviceGetClockInfo", clock))
            if mhz is not None:
                values.append(float(mhz))
        throttled = not THROTTLING.isdisjoint(reasons)
        self._samples += 1
        self._throttled += throttled
        self._seen.update(reasons)
        return SampleState(throttled, reasons)

    def energy_mj(self) -> float | None:
        total = self._device(self._unread, "energy", "nvmlDeviceGetTotalEnergyConsumption")
        return float(total) if isinstance(total, int | float) else None

    def finish(self) -> dict[str, Any] | None:
        temperature_end = self._temperature()
        power_end_mw = self._device(self._unread, "power", "nvmlDeviceGetPowerUsage")
        powers = [_watts(mw) for mw in (self._power_start_mw, power_end_mw)]
        return {
            "sm_clock_mhz_mean": _mean(self._sm_mhz),
            "sm_clock_mhz_min": min(self._sm_mhz) if self._sm_mhz else None,
            "mem_clock_mhz_mean": _mean(self._mem_mhz),
            "temperature_c_start": self._temperature_start,
            "temperature_c_end": temperature_end,
            "power_w": _mean([power for power in powers if power is not None]),
            "throttle_reasons": _ordered(self._seen),
            "samples": self._samples,
            "samples_throttled": self._throttled,
            "unread": sorted(self._unread),
        }

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        _shutdown(self._nvml)


def _shutdown(nvml: Any) -> None:
    with contextlib.suppress(Exception):  # NVML already gone: nothing left to balance
        nvml.nvmlShutdown()


def _handle(nvml: Any, pci_bus_id: str) -> Any:
    """NVML's handle of the GPU at ``pci_bus_id``, or None.

    pynvml passes the id to ``nvmlDeviceGetHandleByPciBusId_v2``; releases before
    11.0 took bytes only, hence the second try.
    """
    attempts: tuple[Callable[[], Any], ...] = (
        lambda: nvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id),
        lambda: nvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id.encode("ascii")),
    )
    for attempt in attempts:
        try:
            return attempt()
        except Exception:
            continue
    return None


def monitor_for(device: DeviceInfo) -> DeviceMonitor:
    """An NVML monitor for an NVIDIA GPU NVML can find, else a ``NullMonitor``.

    The device must name NVIDIA as its vendor (CUDA's "NVIDIA", OpenCL's "NVIDIA
    Corporation") and carry ``extra["pci_bus_id"]`` as PyCUDA's
    ``Device.pci_bus_id()`` gives it ("0000:18:00.0"); ``pynvml`` must import and
    ``nvmlInit`` succeed.
    """
    pci_bus_id = device.extra.get("pci_bus_id")
    if "nvidia" not in device.vendor.lower():
        return NullMonitor(f"not an NVIDIA device ({device.vendor or 'no vendor'})")
    if not isinstance(pci_bus_id, str) or not pci_bus_id:
        return NullMonitor("the device has no PCI bus id")
    try:
        nvml = importlib.import_module("pynvml")
    except Exception as error:  # ImportError, or a broken installation
        return NullMonitor(f"pynvml is not importable ({error}): pip install nvidia-ml-py")
    try:
        nvml.nvmlInit()
    except Exception as error:
        return NullMonitor(f"NVML does not start ({error})")
    handle = _handle(nvml, pci_bus_id)
    if handle is None:
        _shutdown(nvml)
        return NullMonitor(f"NVML finds no GPU at {pci_bus_id}")
    return NvmlMonitor(nvml, handle, pci_bus_id)
