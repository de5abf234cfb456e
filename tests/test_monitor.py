"""The device monitor, against a scripted fake of ``pynvml`` (no GPU, no NVML here)."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest

from xbackend.launches.specs import DeviceInfo
from xbackend.measuring.monitor import (
    THROTTLING,
    NullMonitor,
    NvmlMonitor,
    SampleState,
    monitor_for,
    reason_bits,
    reason_names,
)

BUS_ID = "0000:18:00.0"
GPU = DeviceInfo(name="H100", vendor="NVIDIA", kind="gpu", extra={"pci_bus_id": BUS_ID})
# NVML's documented bits, as the fake's default constants.
IDLE, APPS, POWER_CAP, HW_SLOW, SYNC, SW_THERMAL, HW_THERMAL, BRAKE = (1 << i for i in range(8))


class NVMLError(Exception):
    pass


class FakeNvml(types.ModuleType):
    """pynvml as far as the monitor uses it: every answer scripted, every call counted.

    ``reasons``, ``sm_mhz``, ``mem_mhz``, ``temperatures`` and ``powers_mw`` are
    consumed one per call; ``failing`` names functions that raise NVMLError.
    """

    NVMLError = NVMLError
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_TEMPERATURE_GPU = 0

    def __init__(self, generation: str = "Event", bits: dict[str, int] | None = None):
        super().__init__("pynvml")
        bits = bits or {}
        for suffix, documented in (
            ("GpuIdle", IDLE), ("ApplicationsClocksSetting", APPS), ("SwPowerCap", POWER_CAP),
            ("HwSlowdown", HW_SLOW), ("SyncBoost", SYNC), ("SwThermalSlowdown", SW_THERMAL),
            ("HwThermalSlowdown", HW_THERMAL), ("HwPowerBrakeSlowdown", BRAKE),
        ):  # fmt: skip
            if generation:
                setattr(self, f"nvmlClocks{generation}Reason{suffix}", bits.get(suffix, documented))
        self.calls: list[str] = []
        self.failing: set[str] = set()
        self.reasons: list[int] = []
        self.sm_mhz: list[int] = []
        self.mem_mhz: list[int] = []
        self.temperatures: list[int] = []
        self.powers_mw: list[int] = []
        self.handles: dict[str, object] = {BUS_ID: object()}
        reasons = f"nvmlDeviceGetCurrentClocks{generation or 'Throttle'}Reasons"
        setattr(self, reasons, lambda handle: self._answer(reasons, self.reasons))

    def _answer(self, name: str, script: list[Any] | Any) -> Any:
        self.calls.append(name)
        if name in self.failing:
            raise NVMLError(999)
        return script.pop(0) if isinstance(script, list) else script

    def nvmlInit(self) -> None:
        self._answer("nvmlInit", None)

    def nvmlShutdown(self) -> None:
        self._answer("nvmlShutdown", None)

    def nvmlDeviceGetHandleByPciBusId(self, bus_id: str) -> object:
        self._answer("nvmlDeviceGetHandleByPciBusId", None)
        if bus_id not in self.handles:
            raise NVMLError(6)  # not found
        return self.handles[bus_id]

    def nvmlDeviceGetClockInfo(self, handle: object, clock: int) -> int:
        script = self.sm_mhz if clock == self.NVML_CLOCK_SM else self.mem_mhz
        return int(self._answer(f"nvmlDeviceGetClockInfo({clock})", script))

    def nvmlDeviceGetTemperature(self, handle: object, sensor: int) -> int:
        return int(self._answer("nvmlDeviceGetTemperature", self.temperatures))

    def nvmlDeviceGetPowerUsage(self, handle: object) -> int:
        return int(self._answer("nvmlDeviceGetPowerUsage", self.powers_mw))

    def nvmlDeviceGetName(self, handle: object) -> bytes:
        return bytes(self._answer("nvmlDeviceGetName", b"NVIDIA H100 80GB HBM3"))

    def nvmlSystemGetDriverVersion(self) -> str:
        return str(self._answer("nvmlSystemGetDriverVersion", "570.86.15"))

    def nvmlSystemGetNVMLVersion(self) -> str:
        return str(self._answer("nvmlSystemGetNVMLVersion", "12.570.86.15"))

    def nvmlDeviceGetPersistenceMode(self, handle: object) -> int:
        return int(self._answer("nvmlDeviceGetPersistenceMode", 1))

    def nvmlDeviceGetEccMode(self, handle: object) -> list[int]:
        return list(self._answer("nvmlDeviceGetEccMode", [[1, 0]]))

    def nvmlDeviceGetPowerManagementLimit(self, handle: object) -> int:
        return int(self._answer("nvmlDeviceGetPowerManagementLimit", 700_000))

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: object) -> int:
        return int(self._answer("nvmlDeviceGetEnforcedPowerLimit", 650_000))

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle: object) -> int:
        return int(self._answer("nvmlDeviceGetPowerManagementDefaultLimit", 700_000))

    def nvmlDeviceGetApplicationsClock(self, handle: object, clock: int) -> int:
        return int(self._answer("nvmlDeviceGetApplicationsClock", 1755 if clock == 1 else 2619))

    def nvmlDeviceGetMaxClockInfo(self, handle: object, clock: int) -> int:
        return int(self._answer("nvmlDeviceGetMaxClockInfo", 1980 if clock == 1 else 2619))

    def nvmlDeviceGetComputeMode(self, handle: object) -> int:
        return int(self._answer("nvmlDeviceGetComputeMode", 3))


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeNvml]:
    fake = FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    yield fake


def _point(monitor: Any, fake: FakeNvml, reasons: list[int]) -> list[SampleState]:
    """One point's sampling: start, one sample per scripted reason mask."""
    fake.reasons += reasons
    monitor.start()
    return [monitor.sample() for _ in reasons]


def test_an_nvidia_gpu_with_a_bus_id_gets_an_nvml_monitor(nvml):
    monitor = monitor_for(GPU)
    assert isinstance(monitor, NvmlMonitor)
    assert nvml.calls == ["nvmlInit", "nvmlDeviceGetHandleByPciBusId"]
    # OpenCL names the vendor "NVIDIA Corporation".
    opencl = DeviceInfo(name="H100", vendor="NVIDIA Corporation", extra={"pci_bus_id": BUS_ID})
    assert isinstance(monitor_for(opencl), NvmlMonitor)


@pytest.mark.parametrize(
    "device",
    [
        DeviceInfo(name="Xeon", vendor="x86_64", kind="cpu", extra={"pci_bus_id": BUS_ID}),
        DeviceInfo(name="H100", vendor="NVIDIA", kind="gpu"),  # no bus id
        DeviceInfo(name="H100", vendor="NVIDIA", kind="gpu", extra={"pci_bus_id": 24}),
    ],
)
def test_other_devices_get_a_null_monitor_without_touching_nvml(nvml, device):
    monitor = monitor_for(device)
    assert isinstance(monitor, NullMonitor) and monitor.reason
    assert nvml.calls == []


def test_the_null_monitor_records_nothing():
    monitor = NullMonitor()
    monitor.start()
    assert monitor.sample() == SampleState(False, ())
    assert monitor.header() == {} and monitor.finish() is None
    monitor.close()


def test_no_pynvml_means_a_null_monitor(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    monitor = monitor_for(GPU)
    assert isinstance(monitor, NullMonitor)
    assert "nvidia-ml-py" in monitor.reason


def test_nvml_that_does_not_start_means_a_null_monitor_and_no_shutdown(nvml):
    nvml.failing.add("nvmlInit")
    assert isinstance(monitor_for(GPU), NullMonitor)
    assert "nvmlShutdown" not in nvml.calls


def test_a_gpu_nvml_cannot_find_shuts_nvml_down_again(nvml):
    elsewhere = DeviceInfo(name="H100", vendor="NVIDIA", extra={"pci_bus_id": "0000:3b:00.0"})
    assert isinstance(monitor_for(elsewhere), NullMonitor)
    assert nvml.calls.count("nvmlInit") == nvml.calls.count("nvmlShutdown") == 1


def test_init_and_shutdown_stay_balanced(nvml):
    first, second = monitor_for(GPU), monitor_for(GPU)
    first.close()
    first.close()  # a second close does nothing
    assert nvml.calls.count("nvmlShutdown") == 1
    with second:
        pass
    assert nvml.calls.count("nvmlInit") == nvml.calls.count("nvmlShutdown") == 2


def test_throttling_is_classified_by_reason(nvml):
    monitor = monitor_for(GPU)
    script = [0, IDLE | APPS, SYNC, POWER_CAP, HW_THERMAL | APPS, BRAKE, SW_THERMAL, HW_SLOW]
    nvml.sm_mhz += [1980] * len(script)
    nvml.mem_mhz += [2619] * len(script)
    states = _point(monitor, nvml, script)
    assert [state.throttled for state in states] == [False] * 3 + [True] * 5
    assert states[1].reasons == ("gpu_idle", "applications_clocks")
    assert states[4].reasons == ("applications_clocks", "hw_thermal")
    throttling = {"sw_power_cap", "hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake"}
    assert throttling == THROTTLING


def test_a_point_state_averages_clocks_and_unites_reasons(nvml):
    monitor = monitor_for(GPU)
    nvml.temperatures += [41, 57]
    nvml.powers_mw += [300_000, 500_000]
    nvml.sm_mhz += [1980, 1500, 1755]
    nvml.mem_mhz += [2619, 2619, 2600]
    _point(monitor, nvml, [APPS, POWER_CAP, POWER_CAP | HW_THERMAL])
    state = monitor.finish()
    assert state == {
        "sm_clock_mhz_mean": pytest.approx(1745.0),
        "sm_clock_mhz_min": 1500,
        "mem_clock_mhz_mean": pytest.approx((2619 * 2 + 2600) / 3),
        "temperature_c_start": 41,
        "temperature_c_end": 57,
        "power_w": pytest.approx(400.0),
        "throttle_reasons": ["applications_clocks", "sw_power_cap", "hw_thermal"],
        "samples": 3,
        "samples_throttled": 2,
        "unread": [],
    }


def test_start_forgets_the_last_point(nvml):
    monitor = monitor_for(GPU)
    nvml.temperatures += [40, 50, 60, 70]
    nvml.powers_mw += [100_000] * 4
    nvml.sm_mhz += [1000, 2000]
    nvml.mem_mhz += [2619, 2619]
    _point(monitor, nvml, [HW_SLOW])
    monitor.finish()
    _point(monitor, nvml, [0])
    state = monitor.finish()
    assert state is not None
    assert state["samples"] == 1 and state["samples_throttled"] == 0
    assert state["throttle_reasons"] == [] and state["sm_clock_mhz_mean"] == 2000
    assert (state["temperature_c_start"], state["temperature_c_end"]) == (60, 70)


def test_failed_reads_are_left_out_and_named(nvml):
    monitor = monitor_for(GPU)
    nvml.failing |= {"nvmlDeviceGetPowerUsage", "nvmlDeviceGetClockInfo(2)"}
    nvml.temperatures += [45, 46]
    nvml.sm_mhz += [1900, 1700]
    _point(monitor, nvml, [0, SW_THERMAL])
    state = monitor.finish()
    assert state is not None
    assert state["power_w"] is None and state["mem_clock_mhz_mean"] is None
    assert state["sm_clock_mhz_mean"] == pytest.approx(1800.0)
    assert state["samples_throttled"] == 1
    assert state["unread"] == ["mem_clock", "power"]


def test_when_every_read_fails_the_monitor_still_answers(nvml):
    monitor = monitor_for(GPU)
    nvml.failing |= {name for name in dir(FakeNvml) if name.startswith("nvmlDeviceGet")}
    nvml.failing |= {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlSystemGetDriverVersion"}
    nvml.failing |= {"nvmlDeviceGetClockInfo(1)", "nvmlDeviceGetClockInfo(2)"}
    monitor.start()
    assert monitor.sample() == SampleState(False, ())
    state = monitor.finish()
    assert state is not None and state["samples"] == 1
    assert state["sm_clock_mhz_mean"] is None and state["temperature_c_start"] is None
    assert state["unread"] == ["mem_clock", "power", "sm_clock", "temperature", "throttle_reasons"]
    header = monitor.header()
    assert header["gpu_name"] is None and header["nvml_version"] == "12.570.86.15"
    assert "gpu_name" in header["unread"] and "driver_version" in header["unread"]


def test_a_closed_monitor_reads_nothing(nvml):
    monitor = monitor_for(GPU)
    monitor.close()
    calls = len(nvml.calls)
    monitor.start()
    assert monitor.sample() == SampleState(False, ())
    assert monitor.finish() is not None
    assert len(nvml.calls) == calls


def test_the_header_reads_the_run_level_facts(nvml):
    header = monitor_for(GPU).header()
    assert header == {
        "monitor": "nvml",
        "pci_bus_id": BUS_ID,
        "driver_version": "570.86.15",
        "nvml_version": "12.570.86.15",
        "gpu_name": "NVIDIA H100 80GB HBM3",  # bytes from an older pynvml, decoded
        "persistence_mode": True,
        "ecc_mode": True,  # the current mode, not the pending one
        "power_limit_w": 700.0,
        "enforced_power_limit_w": 650.0,
        "default_power_limit_w": 700.0,
        "applications_clock_sm_mhz": 1755,
        "applications_clock_mem_mhz": 2619,
        "max_clock_sm_mhz": 1980,
        "max_clock_mem_mhz": 2619,
        "compute_mode": "exclusive_process",
        "unread": [],
    }


def test_older_pynvml_names_its_reasons_throttle(monkeypatch):
    fake = FakeNvml(generation="Throttle")
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monitor = monitor_for(GPU)
    fake.sm_mhz += [1980]
    fake.mem_mhz += [2619]
    assert _point(monitor, fake, [HW_THERMAL]) == [SampleState(True, ("hw_thermal",))]
    assert "nvmlDeviceGetCurrentClocksThrottleReasons" in fake.calls


def test_the_newer_reasons_function_falls_back_to_the_older_one(nvml):
    # A new pynvml on an old driver: the Event function is there but not in the driver.
    nvml.failing.add("nvmlDeviceGetCurrentClocksEventReasons")
    nvml.nvmlDeviceGetCurrentClocksThrottleReasons = lambda handle: POWER_CAP  # type: ignore[attr-defined]
    monitor = monitor_for(GPU)
    nvml.sm_mhz += [1980, 1980]
    nvml.mem_mhz += [2619, 2619]
    monitor.start()
    assert monitor.sample() == monitor.sample() == SampleState(True, ("sw_power_cap",))
    # The older function answered, so the newer one is asked no more.
    assert nvml.calls.count("nvmlDeviceGetCurrentClocksEventReasons") == 1


def test_reason_bits_come_from_pynvml_else_from_the_documentation():
    odd = FakeNvml(bits={"SwPowerCap": 0x1000})
    assert reason_bits(odd)["sw_power_cap"] == 0x1000
    assert reason_names(0x1000 | IDLE, reason_bits(odd)) == ("gpu_idle", "sw_power_cap")
    documented = reason_bits(FakeNvml(generation=""))
    assert documented["sw_power_cap"] == 0x4 and documented["display_clocks"] == 0x100
    # A bit NVML added later is kept, by its value, and does not count as throttling.
    assert reason_names(0x200 | HW_SLOW, documented) == ("hw_slowdown", "0x200")
