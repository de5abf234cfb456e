"""A failed OpenCL build's errors at the kernel file's own lines. A stamped build of a
user's kernels puts two lines before the file (the clock's hooks, then ``#line 1``);
NVIDIA's OpenCL compiler ignores ``#line`` and numbers the lines it was given, so a
student's syntax error on line 11 read "line 13" on an H200. The backend asks each
compiler once (kernels/opencl/line_probe.h) and numbers the log as the file's."""

from __future__ import annotations

from typing import Any

import numpy as np

from xbackend.families.sources import HOOKS_PREFIX, with_hooks
from xbackend.pytest_plugin import needs_backend

LOG = "<kernel>:13:15: error: extraneous ')' before ';'\n  sum += A[i] * B[i]);\n"


def _context() -> Any:
    needs_backend("opencl")
    import xbackend

    backend: Any = xbackend.get_backend("opencl")
    return backend._context


def test_this_machines_compiler_is_asked_once_and_honours_line(monkeypatch):
    from xbackend.backends import opencl_build

    context = _context()
    monkeypatch.setattr(opencl_build, "_numbers_by_line", {})
    honours = opencl_build._honours_line(context)
    asked = dict(opencl_build._numbers_by_line)
    assert list(asked.values()) == [honours]
    assert opencl_build._honours_line(context) is honours  # kept, not asked again
    if honours:  # Intel's runtime and PoCL: the log is the file's already
        assert opencl_build.file_lines(context, HOOKS_PREFIX + "x", LOG) == LOG


def test_a_compiler_that_ignores_line_has_its_log_numbered_as_the_file(monkeypatch):
    from xbackend.backends import opencl_build

    context = _context()
    device = context.devices[0]
    key = (device.platform.name, device.name, device.driver_version)
    monkeypatch.setattr(opencl_build, "_numbers_by_line", {key: False})
    rng = np.random.default_rng(5204)
    line = int(rng.integers(3, 400))
    log = f"<kernel>:{line + 2}:7: error: use of undeclared identifier 'Bcols'\n"
    hooked = with_hooks("__kernel void k(__global float* c) { c[0] = 1.0f; }\n")
    assert hooked.startswith(HOOKS_PREFIX)
    said = opencl_build.file_lines(context, hooked, log)
    assert said == f"<kernel>:{line}:7: error: use of undeclared identifier 'Bcols'\n"
    # A build xbackend put nothing before (a shipped kernel, an unstamped one): as it was.
    assert opencl_build.file_lines(context, "__kernel void k() {}\n", log) == log
