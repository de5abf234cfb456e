"""Resource hygiene: no growth over thousands of products, backends side by side, recovery."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import xbackend
from xbackend.problems import Reference, Shape, check, make_operands

PRODUCTS = 1500


def _rss_bytes() -> int:
    status = Path("/proc/self/status")
    if not status.exists():
        pytest.skip("needs /proc/self/status (Linux)")
    for line in status.read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    pytest.skip("no VmRSS")


def _device_free_bytes(backend: xbackend.Backend) -> int | None:
    if backend.name != "cuda":
        return None  # OpenCL has no query for it; on CPU devices the host RSS covers it
    import pycuda.driver as drv

    with backend._active():
        free: int = drv.mem_get_info()[0]
    return free


@pytest.mark.slow
def test_thousands_of_products_do_not_grow_memory(backend):
    # 64×48 · 48×64: 36 KiB of buffers a product, so a leak of one buffer per
    # product would show as 12+ MiB over the loop.
    A, B = make_operands(Shape(64, 48, 64), seed=3)
    variant = "vendor" if "vendor" in backend.runnable_variants() else "tiled"
    for _ in range(200):  # warm up: compiled kernels, caches, allocator pools
        backend.matmul(A, B, variant=variant)
    rss_before, free_before = _rss_bytes(), _device_free_bytes(backend)
    for _ in range(PRODUCTS):
        C = backend.matmul(A, B, variant=variant)
    rss_growth = _rss_bytes() - rss_before
    assert check(C, Reference.of(A, B)).equal
    print(f"{backend.name}: RSS grew {rss_growth / 2**20:.2f} MiB over {PRODUCTS} products")
    assert rss_growth < 8 * 2**20
    # The device's free memory is the whole device's: other pytest workers' products on
    # it move it too, so it is compared only where this process has the device alone.
    if free_before is not None and int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) < 2:
        free_after = _device_free_bytes(backend)
        assert free_after is not None
        assert abs(free_after - free_before) < 2**20


def test_every_available_backend_in_one_process():
    opened = []
    for info in xbackend.backends():
        if info.available:
            opened.append(xbackend.get_backend(info.name))
    try:
        for round_ in range(3):
            A, B = make_operands(Shape(19 + round_, 23, 17), seed=round_)
            reference = Reference.of(A, B)
            for backend in opened:  # interleaved: contexts must not step on each other
                for variant in backend.runnable_variants():
                    C = backend.matmul(A, B, variant=variant)
                    assert check(C, reference).equal, (backend.name, variant)
    finally:
        for backend in opened:
            backend.close()


def test_a_failed_product_leaves_the_backend_usable(backend):
    A, B = make_operands(Shape(12, 10, 8), seed=4)
    variant = backend.runnable_variants()[0]
    with pytest.raises(ValueError):
        backend.matmul(A, B[:-1], variant=variant)
    with pytest.raises(ValueError):
        backend.matmul(A, B, variant=variant, tile=0 if backend.tiles(variant) else 8)
    C = backend.matmul(A, B, variant=variant)
    assert check(C, Reference.of(A, B)).equal
    assert np.isfinite(C).all()
