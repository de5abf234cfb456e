"""What the compilers made of a kernel (xbackend/backends/machine_code.py), read through
CUDA's own tools with no GPU: ptxas's registers and shared memory, and the hot loop that
nvdisasm's listing holds; and the audit's line on two builds of one kernel."""

from __future__ import annotations

import numpy as np
import pytest

from xbackend.backends import machine_code
from xbackend.errors import XBackendError
from xbackend.launches.launch import KernelLaunch
from xbackend.pytest_plugin import needs_backend
from xbackend.sweep import fairness

pytestmark = pytest.mark.skipif(
    machine_code.cuda_tool("nvcc") is None or machine_code.cuda_tool("ptxas") is None,
    reason="needs nvcc and ptxas (the CUDA toolkit)",
)
needs_disassembler = pytest.mark.skipif(
    machine_code.cuda_tool("nvdisasm") is None, reason="needs nvdisasm (nvidia-cuda-nvdisasm)"
)


def _ptx(tile: int, real: str = "float") -> str:
    options = (f"-DTILE={tile}", "-DTM=1", "-DTN=1", f"-DREAL={real}")
    launch = KernelLaunch("mm_tiled", "mm", options, (1, 1, 1), (tile, tile, 1), {})
    dtype = np.dtype("float64" if real == "double" else "float32")
    return machine_code.cuda_ptx(launch, dtype, "sm_90")


def _tiled(tile: int, real: str = "float") -> machine_code.MachineCode:
    return machine_code.read(_ptx(tile, real), "mm_tiled", "sm_90")


@pytest.mark.parametrize(("tile", "real", "size"), [(16, "float", 4), (32, "float", 4),
                                                     (16, "double", 8)])  # fmt: skip
def test_ptxas_says_the_shared_memory_the_tiles_take(tile, real, size):
    code = _tiled(tile, real)
    assert code.shared_bytes == 2 * tile * tile * size  # a tile of A and one of B
    assert 8 <= code.registers <= 255
    assert (code.spill_stores, code.spill_loads, code.stack_bytes) == (0, 0, 0)


@needs_disassembler
@pytest.mark.parametrize(("tile", "real", "fma"), [(16, "float", "FFMA"), (32, "float", "FFMA"),
                                                   (16, "double", "DFMA")])  # fmt: skip
def test_the_hot_loop_is_the_loop_over_a_tile(tile, real, fma):
    """The tiled kernel's loop over k's tiles, unrolled over a tile: TILE fused
    multiply-adds, a barrier before and after them, the tile stored to shared memory."""
    counts = dict(_tiled(tile, real).hot_loop or ())
    assert counts[fma] == tile
    assert counts["BAR.SYNC.DEFER_BLOCKING"] == 2
    assert sum(n for name, n in counts.items() if name.startswith("STS")) == 2


@needs_disassembler
def test_two_builds_compared_say_what_is_the_same_and_what_is_apart():
    one, other = _tiled(16), _tiled(32)
    same = machine_code.differences("mm_tiled", ("cuda", one), ("opencl", one))
    assert same.startswith("mm_tiled: the same machine code (")
    assert "2048 B shared, no spills; the same hot loop" in same
    apart = machine_code.differences("mm_tiled", ("cuda", one), ("opencl", other))
    assert apart.startswith("mm_tiled compiled apart: ")
    assert "2048 B shared, no spills in cuda" in apart and "8192 B shared" in apart
    assert "FFMA 16/32" in apart


def test_a_kernel_the_ptx_lacks_is_an_error_naming_those_it_holds():
    ptx = _ptx(16)
    with pytest.raises(XBackendError, match=r"no kernel mm_missing .*mm_tiled"):
        machine_code.read(ptx, "mm_missing", "sm_90")


def test_the_audit_says_where_no_machine_code_could_be_read():
    """A CPU's OpenCL builds no PTX: the audit says so, and its verdict stands."""
    needs_backend("opencl")
    import xbackend
    from xbackend.operations import Shape

    with xbackend.get_backend("opencl") as one, xbackend.get_backend("opencl") as other:
        if one.device.kind == "gpu":
            pytest.skip("a GPU's OpenCL here")
        found = fairness.audit(("left", one), ("right", other), "mm", "tiled", 16, "float32",
                               Shape(33, 17, 29))  # fmt: skip
    assert found.verdict == "FAIR"
    (line,) = found.compiled
    assert line.startswith("mm_tiled: machine code not read in left: opencl on ")
    assert line.endswith("gives no PTX to read")
    assert found.digests[0] == found.digests[1] and len(found.digests[0]) == 16
