"""The kernels a library launched, as CUPTI's activity records say (measuring/launched.py):
read from a stand-in of cupti-python's module (no GPU here), in order, the harness's own
left out; why nothing was recorded where CUPTI is missing or fails; and what a vendor
point of a device without a tracer records."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from xbackend.measuring import launched as launched_module
from xbackend.measuring.launched import launched, names


class _Kernel:
    """An activity record of a kernel, as cupti-python hands it over."""

    def __init__(self, kind, name, grid, block, registers, shared, start):
        self.kind, self.name = kind, name
        self.grid_x, self.grid_y, self.grid_z = grid
        self.block_x, self.block_y, self.block_z = block
        self.registers_per_thread = registers
        self.static_shared_memory, self.dynamic_shared_memory = shared, 1024
        self.start, self.end = start, start + 2_500


def _stand_in(monkeypatch, kernels, fail_on=None):
    """A ``cupti`` package whose ``cupti`` module records what it was asked, and on a
    flush hands ``kernels`` to the registered callback (CUPTI calls it from its thread)."""
    calls: list[str] = []
    module = types.SimpleNamespace(calls=calls)
    module.ActivityKind = types.SimpleNamespace(CONCURRENT_KERNEL=10, MEMCPY=1)

    def register(requested, completed):
        calls.append("register")
        assert requested() == (launched_module.BUFFER_BYTES, 0)
        module.completed = completed

    def enable(kind):
        if fail_on == "enable":
            raise RuntimeError("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED")
        calls.append(f"enable {kind}")

    module.activity_register_callbacks = register
    module.activity_enable = enable
    module.activity_disable = lambda kind: calls.append(f"disable {kind}")

    def flush(flag):
        calls.append("flush")
        module.completed(kernels)

    module.activity_flush_all = flush
    package = types.ModuleType("cupti")
    package.cupti = module  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupti", package)
    monkeypatch.setitem(sys.modules, "cupti.cupti", module)  # type: ignore[arg-type]
    monkeypatch.setattr(launched_module, "_registered", False)
    return module


def test_the_kernels_a_run_launched_are_read_in_order_but_the_harness_own(monkeypatch):
    rng = np.random.default_rng(7)
    grid = [int(g) for g in rng.integers(1, 200, size=3)]
    gemm = "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8_stage3_warpsize4x2x1"
    records = [
        _Kernel(10, "hold", (1, 1, 1), (1, 1, 1), 8, 0, 100),
        _Kernel(1, "a copy", (0, 0, 0), (0, 0, 0), 0, 0, 150),  # not a kernel
        _Kernel(10, gemm, grid, (256, 1, 1), 202, 32768, 200),
        _Kernel(10, "splitKreduce_kernel", (8, 4, 1), (32, 8, 1), 30, 0, 3000),
    ]
    module = _stand_in(monkeypatch, records)
    ran = []
    found = launched(lambda: ran.append(True), own=("hold",))
    assert ran == [True]
    assert module.calls == ["register", "enable 10", "disable 10", "flush"]
    assert isinstance(found, list) and [k["name"] for k in found] == [gemm, "splitKreduce_kernel"]
    assert found[0] == {"name": gemm, "grid": grid, "block": [256, 1, 1], "registers": 202,
                        "shared_bytes": 32768 + 1024, "device_s": 2.5e-6}  # fmt: skip
    assert names(found) == f"{gemm} + splitKreduce_kernel"
    launched(lambda: None)  # callbacks are registered once a process
    assert module.calls.count("register") == 1


def test_tracing_is_off_again_when_the_run_fails(monkeypatch):
    module = _stand_in(monkeypatch, [])

    def broken():
        raise ValueError("the library failed")

    assert launched(broken) == "not recorded: CUPTI: the library failed"
    assert module.calls[-2:] == ["disable 10", "flush"]


def test_why_nothing_was_recorded(monkeypatch):
    _stand_in(monkeypatch, [], fail_on="enable")
    said = launched(lambda: None)
    assert said == "not recorded: CUPTI: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"
    monkeypatch.setitem(sys.modules, "cupti", None)  # not installed
    assert launched(lambda: None) == (
        "not recorded: cupti-python is not installed (pip install cupti-python)"
    )
    assert names("not recorded: why") == "" and names(None) == ""


@pytest.mark.slow
def test_a_vendor_point_says_what_its_device_recorded():
    """OpenCL has no tracer here: its vendor point (CLBlast) says so; a kernel's point,
    whose kernels are its plan's, records nothing of the kind."""
    from xbackend.pytest_plugin import needs_backend

    needs_backend("opencl")
    import xbackend

    rng = np.random.default_rng(3)
    A, B = rng.standard_normal((40, 24), np.float32), rng.standard_normal((24, 56), np.float32)
    with xbackend.get_backend("opencl") as backend:
        problem = backend.variant_problem("vendor", A.dtype)
        if problem:
            pytest.skip(problem)
        vendor = backend.measure(A, B, "vendor", samples=3, min_samples=3)
        tiled = backend.measure(A, B, "tiled", 16, samples=3, min_samples=3)
    assert vendor.state is not None and vendor.state["vendor_kernels"] == (
        "not recorded: no tracer of launched kernels on this device"
    )
    assert "vendor_kernels" not in (tiled.state or {})
    np.testing.assert_allclose(vendor.result, A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)


def test_the_summary_names_the_kernels_each_vendor_line_launched():
    from xbackend.cli.summary import summary_table
    from xbackend.results import PointRecord

    def point(n, state):
        stats = {"median": 1e-3, "q1": 1e-3, "q3": 1e-3, "min": 1e-3, "noise": 0.01}
        return PointRecord(
            run_id="r", backend="cuda", label="cuda", device="H200", variant="vendor", tile=None,
            dtype="float32", M=n, K=n, N=n, flops=2 * n**3, status="ok", kernel_s=stats,
            end_to_end_s=stats, gflops=2 * n**3 / 1e-3 / 1e9, state=state,
        )  # fmt: skip

    small = {"vendor_kernels": [{"name": "gemm_64x64", "grid": [1, 1, 1], "block": [128, 1, 1]}]}
    gemm = {"name": "gemm_256x128", "grid": [8, 16, 1], "block": [256, 1, 1]}
    large = {"vendor_kernels": [gemm, dict(gemm)]}  # one name, said once
    table = summary_table([point(64, small), point(4096, large)])
    assert "\nthe vendor's kernels:\n  cuda mm vendor float32 at 4096×4096·4096×4096 launched " \
           "gemm_256x128\n" in table + "\n"  # fmt: skip
    untraced = summary_table([point(4096, {"vendor_kernels": "not recorded: why"})])
    assert "the vendor's kernels" not in untraced


@pytest.mark.skipif(__import__("shutil").which("c++filt") is None, reason="needs binutils")
def test_cuptis_mangled_names_are_shown_as_the_source_names_them():
    from xbackend.measuring.launched import demangled

    rng = np.random.default_rng(11)
    tile = int(rng.integers(16, 512))
    kernel = f"gemm_{tile}x128"
    symbol = f"_ZN7cutlass7Kernel2I{len(kernel)}{kernel}EEvNT_6ParamsE"
    assert demangled([symbol, "hold"]) == [f"void cutlass::Kernel2<{kernel}>({kernel}::Params)",
                                          "hold"]  # fmt: skip
    assert demangled(["mm_tiled"]) == ["mm_tiled"]


@pytest.mark.slow
def test_cublas_names_its_kernel_on_a_gpu():
    """Where CUDA and cupti-python are here: a vendor point records the GEMM cuBLAS ran,
    with its launch, and not the harness's hold; a kernel's point records nothing."""
    from xbackend.pytest_plugin import needs_backend

    needs_backend("cuda")
    pytest.importorskip("cupti")
    import xbackend

    rng = np.random.default_rng(5)
    A, B = rng.standard_normal((512, 384), np.float32), rng.standard_normal((384, 640), np.float32)
    with xbackend.get_backend("cuda") as backend:
        vendor = backend.measure(A, B, "vendor", samples=3, min_samples=3)
        tiled = backend.measure(A, B, "tiled", 16, samples=3, min_samples=3)
    found = (vendor.state or {}).get("vendor_kernels")
    assert isinstance(found, list) and found, found
    assert any("gemm" in kernel["name"].lower() for kernel in found)
    assert all(kernel["name"] != "hold" for kernel in found)
    assert all(kernel["block"][0] >= 32 and kernel["device_s"] > 0 for kernel in found)
    assert "vendor_kernels" not in (tiled.state or {})
