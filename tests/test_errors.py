"""Bad input gets a clear error or NumPy's answer, never a crash or a wrong result."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import xbackend
from xbackend.backends.cpu import CpuBackend
from xbackend.problems import Reference, Shape, check, make_operands

SEED = 5


@pytest.mark.parametrize("M, K, N", [(5, 0, 3), (0, 4, 3), (2, 3, 0), (0, 0, 0)])
def test_zero_sized_products_are_what_numpy_gives(backend, M, K, N):
    A = np.ones((M, K), np.float32)
    B = np.ones((K, N), np.float32)
    expected = A @ B
    for variant in backend.runnable_variants():
        C = backend.matmul(A, B, variant=variant)
        assert C.shape == expected.shape and C.dtype == np.float32
        np.testing.assert_array_equal(C, expected)


@pytest.mark.parametrize("dtype", [np.float16, np.complex64, object, np.bool_])
def test_unsupported_dtypes_name_the_supported_ones(backend, dtype):
    A = np.ones((3, 2)).astype(dtype)
    with pytest.raises(ValueError, match=r"supported: int32, float32, float64"):
        backend.matmul(A, A.T, variant=backend.runnable_variants()[0])


def test_mixed_dtypes_are_refused(backend):
    A = np.ones((3, 2), np.float32)
    with pytest.raises(ValueError, match=r"B .*float64"):
        backend.matmul(A, np.ones((2, 3)), variant=backend.runnable_variants()[0])


@pytest.mark.slow
def test_nan_and_inf_propagate_as_numpy_does(backend):
    A, B = make_operands(Shape(9, 7, 11), SEED)
    A[1, 2] = np.nan
    A[3, 0] = np.inf
    B[4, 5] = -np.inf
    B[0, :] = 0.0  # inf × 0 is NaN in row 3
    with np.errstate(invalid="ignore"):
        expected = A.astype(np.float64) @ B.astype(np.float64)
    for variant in backend.runnable_variants():
        C = backend.matmul(A, B, variant=variant)
        np.testing.assert_array_equal(np.isnan(C), np.isnan(expected), err_msg=variant)
        np.testing.assert_array_equal(np.isposinf(C), np.isposinf(expected), err_msg=variant)
        np.testing.assert_array_equal(np.isneginf(C), np.isneginf(expected), err_msg=variant)
        finite = np.isfinite(expected)
        np.testing.assert_allclose(C[finite], expected[finite], rtol=1e-4, atol=1e-5)


def test_rmm_naive4_adds_its_products_one_by_one_so_an_infinity_can_become_nan(backend):
    """naive4 is the definition's kernel: it adds the 4·K products of a 2×2 block one
    by one, so an infinity meeting products of both signs (−inf·0.75 + −inf·(−0.25))
    gives NaN where NumPy and every other variant, summing the pairs first, give
    −inf·0.5 = −inf. Its one documented exception to "NaN and Inf as NumPy"."""
    if "naive4" not in backend.variants("rmm"):
        pytest.skip(f"{backend.name} has no rmm naive4")
    assert "NaN" in backend.variant_spec("naive4", "rmm").description
    others = [v for v in backend.runnable_variants("rmm") if v != "naive4"]
    A, B = make_operands(Shape(6, 5, 8), SEED)
    # Finite inputs: naive4 computes the reduced product like the others.
    assert check(backend.rmm(A, B, variant="naive4"), Reference.of(A, B, "rmm")).equal
    # The review's case, then the same inside random operands.
    tiny_A = np.array([[-np.inf], [0.25]], np.float32)
    tiny_B = np.array([[0.75, -0.25]], np.float32)
    assert np.isnan(backend.rmm(tiny_A, tiny_B, variant="naive4")).all()
    for variant in others:
        np.testing.assert_array_equal(backend.rmm(tiny_A, tiny_B, variant=variant), [[-np.inf]])
    A[2, 3] = -np.inf  # row pair 1
    B[3, 0:2] = (0.75, -0.25)  # column pair 0: products of both signs, NaN in naive4
    B[3, 2:4] = (0.5, 0.25)  # column pair 1: one sign, -inf in every variant
    with np.errstate(invalid="ignore"):
        expected = Reference.of(A, B, "rmm").product
    assert np.isneginf(expected[1, :2]).all()
    finite = np.isfinite(expected)
    for variant in ["naive4", *others]:
        C = backend.rmm(A, B, variant=variant)
        assert np.isnan(C[1, 0]) if variant == "naive4" else np.isneginf(C[1, 0]), variant
        assert np.isneginf(C[1, 1]), variant
        np.testing.assert_array_equal(np.isneginf(C[1, 2:]), np.isneginf(expected[1, 2:]))
        np.testing.assert_allclose(C[finite], expected[finite], rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_too_large_for_the_device_is_an_out_of_memory_error(backend, monkeypatch):
    small = dataclasses.replace(backend.device, global_mem_bytes=2**20, max_alloc_bytes=None)
    monkeypatch.setattr(backend, "_device", small)
    A, B = make_operands(Shape(400, 300, 500), SEED)  # 1.8 MiB in all
    with pytest.raises(xbackend.DeviceOutOfMemory) as caught:
        backend.matmul(A, B, variant=backend.runnable_variants()[0])
    message = str(caught.value)
    assert "A 400×300, B 300×500 and C 400×500 (float32) need 1.79 MiB" in message
    assert "the device has 1 MiB in all" in message
    assert isinstance(caught.value, MemoryError)
    monkeypatch.undo()  # the backend is still usable
    C = backend.matmul(A, B, variant=backend.runnable_variants()[0])
    assert np.isfinite(C).all()


def test_largest_buffer_over_the_allocation_limit_is_refused(backend, monkeypatch):
    limited = dataclasses.replace(backend.device, max_alloc_bytes=4096)
    monkeypatch.setattr(backend, "_device", limited)
    A, B = make_operands(Shape(40, 30, 50), SEED)
    with pytest.raises(xbackend.DeviceOutOfMemory, match="one buffer may hold at most"):
        backend.matmul(A, B, variant=backend.runnable_variants()[0])


class _ExhaustedBackend(CpuBackend):
    def _execution(self, op, variant, tile, A, B, params=None):
        raise MemoryError("cannot allocate")


def test_a_drivers_out_of_memory_becomes_a_clear_error():
    A, B = make_operands(Shape(8, 6, 4), SEED)
    with pytest.raises(xbackend.DeviceOutOfMemory, match=r"A 8×6, B 6×4 and C 8×4.*cannot"):
        _ExhaustedBackend().matmul(A, B, variant="vendor")


def test_a_closed_backend_says_so():
    cpu = xbackend.get_backend("cpu")
    cpu.close()
    cpu.close()  # twice is fine
    with pytest.raises(xbackend.XBackendError, match="closed"):
        cpu.matmul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), variant="vendor")
