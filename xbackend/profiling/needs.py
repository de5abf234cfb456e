"""What a profile needs, and what each backend or machine lacks, in one line each.

Nsight Compute counts what CUDA kernels do; nothing else xbackend runs can be profiled
by it. A backend other than ``cuda`` is refused with what would be needed instead, as
are a machine without CUDA and one without ncu.
"""

from __future__ import annotations

from collections.abc import Sequence

from xbackend.backends.registry import backend_class
from xbackend.errors import XBackendError
from xbackend.results.plan import Target

PROFILED_BACKEND = "cuda"
INSTEAD = f"use --backends {PROFILED_BACKEND}"
OTHER_BACKENDS = {
    "opencl": "Nsight Compute profiles CUDA kernels only, and NVIDIA's OpenCL driver gives "
    "it no counters; another vendor's OpenCL would need that vendor's profiler (Intel VTune "
    "or unitrace, AMD rocprof) and a reader of its output, which xbackend does not have; "
    "the CUDA twins of the kernels make the same loads",
    "cpu": "Nsight Compute profiles GPU kernels only; the CPU's counters would need Linux "
    "perf with access to perf_event (perf_event_paranoid ≤ 1, or CAP_PERFMON) and a reader "
    "of its output, which xbackend does not have",
}
NO_NCU = (
    "ncu: Nsight Compute's command line is neither on PATH nor at {default}: install "
    "Nsight Compute (it comes with the CUDA toolkit), or pass --ncu PATH"
)


def targets(text: str) -> list[Target]:
    """``--backends`` as targets; ``auto`` is the one backend that can be profiled."""
    if text.strip().lower() == "auto":
        return [Target(PROFILED_BACKEND)]
    found = [Target.parse(item) for item in text.split(",") if item.strip()]
    if not found:
        raise XBackendError("--backends is empty")
    return found


def backend_problems(found: Sequence[Target]) -> list[str]:
    """One line for each backend asked for that cannot be profiled, with what it needs."""
    problems = []
    for name in dict.fromkeys(target.name for target in found):
        if name == PROFILED_BACKEND:
            continue
        why = OTHER_BACKENDS.get(name, "Nsight Compute profiles xbackend's CUDA kernels only")
        problems.append(f"{name}: {why}; {INSTEAD}")
    return problems


def cuda_problem() -> str | None:
    """Why CUDA cannot run here, in one line with what it needs; None where it can."""
    try:
        available, reason = backend_class(PROFILED_BACKEND).available()
    except XBackendError as error:
        available, reason = False, str(error)
    if available:
        return None
    return f"cuda: {reason}; a profile needs an NVIDIA GPU, its driver and pycuda"


def no_ncu(default: str) -> str:
    return NO_NCU.format(default=default)
