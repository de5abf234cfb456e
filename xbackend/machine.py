"""The machine's names (its CPU, the NVIDIA driver) and the one setting made before NumPy
loads: the BLAS threads' spin. The run header's whole record of the machine is
``sweep/environment.py``'s."""

from __future__ import annotations

import os
import platform
import sys

# NumPy's OpenBLAS keeps each idle thread spinning for 2^28 cycles (about 0.1 s) after a
# call. The float64 references and the CPU's points left a core's worth of spinning
# threads per core while GPU points were timed: on two H200s (32 cores) NVIDIA OpenCL's
# end-to-end times grew from 0.7 to 2.3 ms (median over points) and the default compare
# took 21 s from the first point to the last instead of 9 (docs/notebook/measurement.md).
# Set as xbackend is imported (its face imports this module first), before NumPy loads
# OpenBLAS, the threads sleep as soon as they are idle; a value already set is kept, and
# every run header records it (``environment.settings``). OpenBLAS reads the variable once,
# as it loads: where NumPy (and so OpenBLAS) was imported before xbackend, as API users
# often do, the value set here is not in force, and the run header says so.
BLAS_LOADED_FIRST = "numpy" in sys.modules and "OPENBLAS_THREAD_TIMEOUT" not in os.environ
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")


def cpu_name() -> str:
    """The processor's model name, as the OS reports it."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def nvidia_kernel_driver() -> str:
    """The NVIDIA kernel driver's version (580.159.04), as /proc says it; "" elsewhere."""
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as file:
            first = file.readline()
    except OSError:
        return ""
    words = first.split()
    return next((w for w in words if w.count(".") >= 1 and w[0].isdigit()), "")
