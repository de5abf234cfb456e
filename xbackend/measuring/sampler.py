"""The measurement loop every backend shares: the checked first run, the warm-up, then
timed samples until ``timing.stop_reason`` says enough.

Each sample poisons the output, uploads the inputs, prepares the cache as the
mode asks (``--cache``: flushed for ``cold``, one untimed run for ``hot``), runs
the product once and downloads the output: the end-to-end time is the host clock's
over the upload, that run and the download, without the cache preparation. The
kernel time is that run's by the device's clock; where one launch is shorter than
``Sampling.short_kernel_s``, it is a batch's instead, of back-to-back launches run
after the product and divided by their number (where the kernels stamp the device's
own clock, their span, with the API's time kept beside it: stamps.py).
A sample is marked, and left out of the statistics and the stopping rule, when
the device throttled during it or the CUDA hold gave up (the time may then
include the host's launching).

Given a ``verify``, every output the loop downloads after the first is verified with it,
outside every timed window: each warm-up run's, each sample's run's and, where there
is one, its batch's (the last launch's output: the launches of a batch before it are
never downloaded). An output bit for bit the first run's is taken as that one is (the
caller checks the first): a deterministic kernel costs a comparison of bytes, not a
check. The first wrong output is kept (``Sampled.wrong``), and no later one verified.
"""

from __future__ import annotations

import dataclasses
import gc
import math
import statistics
import time
from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from xbackend.measuring.host_load import HostWatch
from xbackend.measuring.monitor import NullMonitor, SampleState
from xbackend.measuring.timing import Sampling, stop_reason, unmarked
from xbackend.measuring.verified import Verify, WrongRun

Array = np.ndarray[Any, Any]


class Runs(Protocol):
    """What the loop needs of an ``interface.Execution``."""

    def upload(self) -> None: ...
    def poison(self) -> None: ...
    def run(self) -> float: ...
    def run_batch(self, launches: int) -> float: ...
    def download(self) -> Array: ...
    def flush_cache(self) -> None: ...
    @property
    def run_mark(self) -> str: ...


class Monitor(Protocol):
    """What watches the device while a point is sampled (``monitor.DeviceMonitor``)."""

    def header(self) -> dict[str, Any]: ...
    def start(self) -> None: ...
    def sample(self) -> SampleState: ...
    def finish(self) -> dict[str, Any] | None: ...


# This process's CPU time, every thread of it (kept apart from ``time``, which a test may
# replace with a clock of its own).
_process_time = time.process_time

# No monitor: every sample is taken as it came.
NO_MONITOR: Monitor = NullMonitor()


@dataclasses.dataclass
class Sampled:
    """The loop's outcome: the checked outputs, the samples, and how they were taken."""

    result: Array
    last_result: Array
    kernel_s: list[float] = dataclasses.field(default_factory=list)
    end_to_end_s: list[float] = dataclasses.field(default_factory=list)
    marks: list[str] = dataclasses.field(default_factory=list)
    # Where the kernels time themselves (stamps.py), per sample: the API's clock per
    # launch, and a batch's mean gap between launches on the device.
    api_s: list[float] = dataclasses.field(default_factory=list)
    gap_s: list[float] = dataclasses.field(default_factory=list)
    # On a CPU device, per sample, the CPU time every thread of this process used over
    # the kernel's run (per launch, as kernel_s): what other jobs move far less than the
    # wall clock (docs/measurement.md). Empty elsewhere.
    cpu_s: list[float] = dataclasses.field(default_factory=list)
    launches: int = 1
    stop: str = ""
    state: dict[str, Any] | None = None
    # What other processes took of the host while the samples were taken (host_load.py).
    host_load: dict[str, Any] | None = None
    # Where there is a ``verify``: the outputs it verified (or found bit for bit the
    # first's), and the first it found wrong.
    verified: int = 0
    wrong: WrongRun | None = None
    # A batched sample's run's output, kept apart before the batch downloads over it.
    run_output: Array | None = None

    def kept(self) -> tuple[list[float], list[float]]:
        return unmarked(self.kernel_s, self.marks), unmarked(self.end_to_end_s, self.marks)


def sample(
    execution: Runs, sampling: Sampling, monitor: Monitor = NO_MONITOR, on_cpu: bool = False,
    verify: Verify | None = None,
) -> Sampled:  # fmt: skip
    """The first result, then ``sampling.warmup`` untimed runs, then timed samples
    (``on_cpu``: the device is a CPU, whose short calls are batched longer:
    ``Sampling.launches_for``), each output after the first verified by ``verify`` where
    there is one (the module's docstring). Python's garbage collector is off while they
    are taken: a collection is a pause of the harness, not of the kernel."""
    execution.poison()
    execution.upload()
    shortest = execution.run()
    result = execution.download().copy()  # the execution's host array is reused
    sampled = Sampled(result, result)
    for number in range(1, sampling.warmup + 1):
        execution.upload()
        shortest = min(shortest, execution.run())
        _verified(verify, sampled, execution.download(), "warm-up", number)
    sampled.launches = sampling.launches_for(shortest, on_cpu)
    if sampling.max_samples <= 0:
        return sampled
    monitor.start()
    host = HostWatch(probe=on_cpu)
    host.start()
    # Off, not collected first: a full collection took 17 ms a point in a small process
    # (more in the test suite's, which holds many more objects), and frees nothing the
    # samples need.
    collecting = gc.isenabled()
    gc.disable()
    energy = None
    try:
        _take_samples(execution, sampling, monitor, sampled, on_cpu, verify)
        if sampling.energy_s > 0:
            energy = measure_energy(execution, sampling, monitor, sampled)
    finally:
        if collecting:
            gc.enable()
        sampled.state = monitor.finish()
        sampled.host_load = host.finish()
    threads = getattr(execution, "blas_threads", None)  # the CPU backend's vendor line
    if threads is not None and sampled.host_load is not None:
        sampled.host_load["blas_threads"] = float(threads)
    if energy is not None:
        sampled.state = {**(sampled.state or {}), "energy": energy}
    # A library's kernels (a vendor point's), traced over one more run (launched.py).
    seen = getattr(execution, "vendor_kernels", lambda: None)()
    if seen is not None:
        sampled.state = {**(sampled.state or {}), "vendor_kernels": seen}
    # The last sample's output, copied once (before its host array is reused or freed).
    sampled.last_result = sampled.last_result.copy()
    return sampled


def _take_samples(
    execution: Runs, sampling: Sampling, monitor: Monitor, into: Sampled, on_cpu: bool = False,
    verify: Verify | None = None,
) -> None:  # fmt: skip
    """Samples until the stopping rule says enough; each verified after it is timed, the
    verifying's time left out of the rule's elapsed time (the samples taken are those an
    unverified run takes)."""
    began, verifying_s = time.perf_counter(), 0.0
    kept_run = verify is not None and into.launches > 1  # the batch downloads over it
    while True:
        keep = kept_run and into.wrong is None
        kernel_s, end_to_end_s, cpu_s = _one_sample(execution, sampling, into, keep)
        mark = execution.run_mark
        if monitor.sample().throttled:
            mark = mark or "throttled"
        into.kernel_s.append(kernel_s)
        into.end_to_end_s.append(end_to_end_s)
        if on_cpu:
            into.cpu_s.append(cpu_s)
        into.marks.append(mark)
        _stamped(execution, into)
        verifying_s += _verify_sample(verify, into)
        kept_kernel, kept_end_to_end = into.kept()
        elapsed = time.perf_counter() - began - verifying_s
        if len(into.kernel_s) >= sampling.max_samples:
            into.stop = "max-samples"
        elif elapsed >= sampling.timeout_s:
            into.stop = "timeout"
        else:
            into.stop = stop_reason(sampling, kept_kernel, kept_end_to_end, elapsed) or ""
        if into.stop:
            return


def _verify_sample(verify: Verify | None, into: Sampled) -> float:
    """Verify the last sample's outputs (its run's, then its batch's); the seconds it took."""
    if verify is None or into.wrong is not None:
        return 0.0
    began, number = time.perf_counter(), len(into.kernel_s)
    if into.run_output is not None:  # a batch followed: its run's output was kept apart
        _verified(verify, into, into.run_output, "timed", number)
        _verified(verify, into, into.last_result, "timed", number, into.launches)
    else:
        _verified(verify, into, into.last_result, "timed", number)
    return time.perf_counter() - began


def _verified(
    verify: Verify | None, into: Sampled, output: Array, kind: str, number: int, batch: int = 0
) -> None:
    """``output`` verified (where there is a ``verify`` and no earlier output was wrong):
    the first wrong one kept in ``into.wrong``. An output bit for bit the first run's is
    as right as that one, which the caller checks: a comparison of bytes, not a check."""
    if verify is None or into.wrong is not None:
        return
    into.verified += 1
    if not np.array_equal(output, into.result) and not verify(output):
        into.wrong = WrongRun(kind, number, output.copy(), batch)


# The longest wait for the energy counter's next update at either end of a window.
TICK_WAIT_S = 0.5
# Batches a window is cut into (at least): the window's end is known to one batch.
ENERGY_BATCHES = 100


def measure_energy(
    execution: Runs, sampling: Sampling, monitor: Monitor, sampled: Sampled
) -> dict[str, Any]:
    """Joules per product: the product launched back to back, in batches of at most
    ``max_launches``, for ``energy_s``, between two updates of the device's energy
    counter. Where there is no counter, why not.

    NVML's counter moves in steps (every 64-102 ms on an H200): read at arbitrary times,
    a one-second window was off by up to a step at each end (two identical runs' joules
    apart by 0.91-1.11x). So the window starts as the counter steps, and ends at the
    first step after ``energy_s``: the energy is then the steps' difference, and the
    products those launched between them, to within the last batch (a hundredth of the
    window, or one product where a product is longer). The host's time between batches
    (a few microseconds each, the GPU idle) is in the window, as in a user's loop.
    """
    counter = getattr(monitor, "energy_mj", None)  # a monitor may have none (a plugin's)
    first = _next_step(counter, counter()) if counter is not None else None
    if counter is None or first is None:
        return {"unread": "the device has no energy counter here (NVML, an NVIDIA GPU)"}
    per_launch = max(statistics.median(sampled.kernel_s), 1e-7)
    batch = int(min(sampling.max_launches, max(1, sampling.energy_s / ENERGY_BATCHES / per_launch)))
    products, start, seen = 0, time.perf_counter(), first
    while True:
        execution.run_batch(batch)
        products += batch
        value, elapsed = counter(), time.perf_counter() - start
        stepped = value is not None and value != seen
        seen = seen if value is None else value
        if elapsed >= sampling.energy_s and (stepped or elapsed >= sampling.energy_s + TICK_WAIT_S):
            break
    if seen <= first:
        return {"unread": "the energy counter did not move over the window"}
    joules = (seen - first) / 1000
    return {"joules_per_product": joules / products, "watts": joules / elapsed,
            "window_s": elapsed, "products": products}  # fmt: skip


def _next_step(counter: Any, since: float | None) -> float | None:
    """The counter's first value other than ``since`` (polled for ``TICK_WAIT_S``); the
    last value read where it does not move; None where it cannot be read."""
    if since is None:
        return None
    deadline = time.perf_counter() + TICK_WAIT_S
    value: float | None = since
    while value == since and time.perf_counter() < deadline:
        time.sleep(0.0005)
        value = counter()
    return value


def joules_per_product(state: Mapping[str, Any] | None) -> float | None:
    """The joules per product ``measure_energy`` put in a point's state; None where it
    read none (no window, or ``unread``) or the value is no positive finite number (a
    results file is read, not trusted)."""
    energy = (state or {}).get("energy")
    joules = energy.get("joules_per_product") if isinstance(energy, Mapping) else None
    if isinstance(joules, bool) or not isinstance(joules, int | float):
        return None
    try:
        value = float(joules)
    except OverflowError:  # an integer no float holds
        return None
    return value if math.isfinite(value) and value > 0 else None


def _stamped(execution: Runs, into: Sampled) -> None:
    """Keep what a stamped run says beside its span (``Execution.api_s``, ``gap_s``);
    an execution that does not stamp has neither."""
    api_s, gap_s = getattr(execution, "api_s", None), getattr(execution, "gap_s", None)
    if api_s is not None:
        into.api_s.append(api_s)
    if gap_s is not None:
        into.gap_s.append(gap_s)


def _one_sample(
    execution: Runs, sampling: Sampling, into: Sampled, keep_run: bool = False
) -> tuple[float, float, float]:
    """(kernel seconds per launch, end-to-end seconds, CPU seconds per launch) of one
    sample; the output is downloaded into ``into.last_result`` (``keep_run``: the run's
    copied into ``into.run_output`` before a batch downloads over it, untimed). The CPU
    time is this process's, every thread of it, over the run the kernel time is of (the
    batch's, where there is one): ``time.process_time``, read to the microsecond or better
    on Linux.

    The end-to-end time is one product's, as a user's call makes it: the upload, one run
    (every launch of the product) and the download, on the host's clock. A short kernel's
    batch, which the kernel clock needs, runs after that, outside the end-to-end window:
    each of its launches costs the host a launch too (about 10 µs in CUDA, over 100 µs
    in some OpenCL drivers), which no device clock sees and no subtraction removes."""
    execution.poison()
    start = time.perf_counter()
    execution.upload()
    uploaded = time.perf_counter()
    _prepare_cache(execution, sampling)
    launched = time.perf_counter()
    cpu_began = _process_time()
    kernel_s = execution.run()
    cpu_s = _process_time() - cpu_began
    into.last_result = execution.download()  # copied once sampling ends, untimed
    done = time.perf_counter()
    end_to_end_s = max((uploaded - start) + (done - launched), kernel_s)
    if into.launches > 1:
        if keep_run:  # to verify: the batch's download reuses the host array
            into.run_output = into.last_result.copy()
        # The batch finds the cache the product above left (never used with a cold
        # cache: Sampling.launches_for); its output is poisoned first and is the one
        # checked, so a launch of the batch that writes nothing is still caught.
        execution.poison()
        cpu_began = _process_time()
        kernel_s = execution.run_batch(into.launches) / into.launches
        cpu_s = (_process_time() - cpu_began) / into.launches
        into.last_result = execution.download()
    return kernel_s, end_to_end_s, cpu_s


def _prepare_cache(execution: Runs, sampling: Sampling) -> None:
    """The cache state ``--cache`` asks for, outside every timed window."""
    if sampling.cache == "cold":
        execution.flush_cache()
    elif sampling.cache == "hot":
        execution.run()  # the timed run finds what this one left in the cache
        execution.poison()
