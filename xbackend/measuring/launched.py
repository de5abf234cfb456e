"""The kernels a library launched, as CUPTI saw them: a vendor point's own kernels named.

cuBLAS picks its kernel for each product inside the library: the name (its block tile,
k-slab and stage count: ``sm80_xmma_gemm_..._tilesize256x128x8_stage3_...``), the grid and
the block it launched say what a hand-written rung is compared with. CUPTI's activity API
(the ``cupti-python`` package) records every kernel a context launches: ``launched`` turns
it on around one run of a product, off after it, and returns each kernel with its grid,
block, registers a thread and shared memory a block. CUPTI reports asynchronously; the
records are flushed before they are read. Where ``cupti-python`` is not installed or CUPTI
cannot trace (another tool, Nsight Compute for one, holds it), a sentence says why. Names
are demangled where binutils' ``c++filt`` is installed.

Tracing is on only while that one run is made, after the point's samples: the samples and
the energy window run untraced.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Callable, Collection
from typing import Any

Launched = list[dict[str, Any]]

_lock = threading.Lock()
_records: Launched = []
_registered = False
BUFFER_BYTES = 1 << 20  # each buffer CUPTI asks for: thousands of kernel records


def _requested() -> tuple[int, int]:
    return BUFFER_BYTES, 0  # the buffer's bytes, and no cap on its records


def _completed(activities: list[Any]) -> None:
    from cupti import cupti

    with _lock:
        for activity in activities:
            if activity.kind != cupti.ActivityKind.CONCURRENT_KERNEL:
                continue
            _records.append({
                "name": str(activity.name),
                "grid": [activity.grid_x, activity.grid_y, activity.grid_z],
                "block": [activity.block_x, activity.block_y, activity.block_z],
                "registers": activity.registers_per_thread,
                "shared_bytes": activity.static_shared_memory + activity.dynamic_shared_memory,
                "device_s": (activity.end - activity.start) * 1e-9,
            })  # fmt: skip


def launched(work: Callable[[], object], own: Collection[str] = ()) -> Launched | str:
    """The kernels ``work`` launched on the current CUDA context, in order, but those
    named in ``own`` (the harness's: the stream's hold); or why none could be recorded."""
    global _registered
    try:
        from cupti import cupti
    except ImportError:
        return "not recorded: cupti-python is not installed (pip install cupti-python)"
    kind = cupti.ActivityKind.CONCURRENT_KERNEL
    try:
        if not _registered:
            cupti.activity_register_callbacks(_requested, _completed)
            _registered = True
        with _lock:
            _records.clear()
        cupti.activity_enable(kind)
        try:
            work()
        finally:
            cupti.activity_disable(kind)
            cupti.activity_flush_all(1)  # every record, finished or not: the run has ended
    except Exception as error:  # CUPTI's own errors, whatever their class in this version
        return f"not recorded: CUPTI: {error}".splitlines()[0]
    with _lock:
        found = [record for record in _records if record["name"] not in own]
    for record, name in zip(found, demangled([r["name"] for r in found]), strict=True):
        record["name"] = name
    return found


def demangled(symbols: list[str]) -> list[str]:
    """C++ symbols as their source names them (CUPTI's are mangled: ``_ZN7cutlass7Kernel2I
    ...`` is ``cutlass::Kernel2<...>``), through binutils' c++filt where it is installed;
    as they are elsewhere."""
    tool = shutil.which("c++filt")
    if tool is None or not any(symbol.startswith("_Z") for symbol in symbols):
        return symbols
    try:
        done = subprocess.run([tool], input="\n".join(symbols), capture_output=True, text=True,
                              timeout=30, check=True)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return symbols
    names = done.stdout.splitlines()
    return names if len(names) == len(symbols) else symbols


def names(found: Launched | str | None) -> str:
    """The kernels' names, as a table cell shows them ("" where none were recorded)."""
    if not isinstance(found, list):
        return ""
    return " + ".join(dict.fromkeys(str(record.get("name", "")) for record in found))
