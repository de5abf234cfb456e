"""Batched and reduced products, int32/float32/float64, strided views: every backend."""

from __future__ import annotations

import numpy as np
import pytest

import xbackend
from xbackend.launches.operands import row_major_span
from xbackend.problems import DTYPES, Reference, Shape, check, make_operands

SEED = 314
DTYPE_NAMES = list(DTYPES)


def _tile_cases(backend: xbackend.Backend, op: str, dtype: np.dtype):
    for variant in backend.runnable_variants(op, dtype):
        for tile in backend.tiles(variant, op, dtype.itemsize) or (None,):
            yield variant, tile


def _skip_unsupported(backend: xbackend.Backend, dtype: str) -> None:
    problem = backend.dtype_problem(DTYPES[dtype])
    if problem:
        pytest.skip(problem)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize(
    "batch, shape",
    [(1, Shape(5, 3, 7)), (3, Shape(17, 13, 19)), (2, Shape(33, 1, 40))],
    ids=["1x5x3x7", "3x17x13x19", "2x33x1x40"],
)
def test_bmm_every_variant_and_tile(backend, dtype, batch, shape):
    _skip_unsupported(backend, dtype)
    A, B = make_operands(shape, SEED, DTYPES[dtype], batch=batch)
    reference = Reference.of(A, B, "bmm")
    for variant, tile in _tile_cases(backend, "bmm", A.dtype):
        measured = backend.measure(A, B, variant, tile, op="bmm", samples=1, min_samples=1)
        for output in (measured.result, measured.last_result):
            assert output.shape == (batch, shape.M, shape.N) and output.dtype == A.dtype
            assert check(output, reference).equal, (variant, tile)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize(
    "shape", [Shape(2, 1, 2), Shape(8, 5, 6), Shape(34, 70, 66)], ids=lambda s: f"{s.M}x{s.K}x{s.N}"
)
def test_rmm_every_variant_and_tile(backend, dtype, shape):
    _skip_unsupported(backend, dtype)
    A, B = make_operands(shape, SEED, DTYPES[dtype])
    reference = Reference.of(A, B, "rmm")
    # The definition, computed the long way: the sum of each 2×2 block of A · B.
    full = A.astype(np.float64) @ B.astype(np.float64)
    blocks = full.reshape(shape.M // 2, 2, shape.N // 2, 2).sum(axis=(1, 3))
    np.testing.assert_allclose(reference.product, blocks, rtol=1e-12, atol=1e-9)
    for variant, tile in _tile_cases(backend, "rmm", A.dtype):
        C = backend.rmm(A, B, variant=variant, tile=tile)
        assert C.shape == (shape.M // 2, shape.N // 2) and C.dtype == A.dtype
        assert check(C, reference).equal, (variant, tile)


def test_rmm_odd_sizes_are_a_clear_error(backend):
    A, B = make_operands(Shape(5, 4, 6), SEED)
    with pytest.raises(ValueError, match="even number of rows in A and columns in B"):
        backend.rmm(A, B, variant=backend.runnable_variants("rmm")[0])


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_mm_in_every_dtype(backend, dtype):
    _skip_unsupported(backend, dtype)
    A, B = make_operands(Shape(37, 29, 41), SEED, DTYPES[dtype])
    reference = Reference.of(A, B)
    for variant, tile in _tile_cases(backend, "mm", A.dtype):
        C = backend.matmul(A, B, variant=variant, tile=tile)
        assert C.dtype == A.dtype
        verdict = check(C, reference)
        assert verdict.equal, (variant, tile, verdict)
        if dtype == "int32":
            np.testing.assert_array_equal(C, A.astype(np.int64) @ B.astype(np.int64))


VIEWS = {
    "column slice": lambda X: X[:, 5:37],
    "row slice": lambda X: X[3:20, :32],
    "every other row": lambda X: X[::2, :32],
    "every other column": lambda X: X[:32, ::2],
    "transposed": lambda X: X.T[:32, :32],
    "reversed rows": lambda X: X[::-1, :32],
}


@pytest.mark.parametrize("view", VIEWS, ids=list(VIEWS))
def test_strided_views_without_copying_first(backend, view):
    rng = np.random.default_rng(SEED)
    big_a = rng.uniform(-1, 1, (40, 64)).astype(np.float32)
    A = VIEWS[view](big_a)
    B = rng.uniform(-1, 1, (200, 70)).astype(np.float32)[7 : 7 + A.shape[1], 3:60]
    reference = Reference.of(A, B)
    for variant, tile in _tile_cases(backend, "mm", np.dtype(np.float32)):
        assert check(backend.matmul(A, B, variant=variant, tile=tile), reference).equal


def test_row_major_span_passes_views_without_a_copy():
    big = np.arange(40 * 64, dtype=np.float32).reshape(40, 64)
    span, ld = row_major_span(big[2:10, 5:37])
    assert ld == 64 and np.shares_memory(span, big)
    assert span[0] == big[2, 5] and span[-1] == big[9, 36]
    copied, ld = row_major_span(big[:10, ::2])  # a column step: copied, packed
    assert ld == 32 and not np.shares_memory(copied, big)


def test_float64_where_the_device_has_no_fp64_is_a_clear_error(backend, monkeypatch):
    if backend.name != "opencl":
        pytest.skip("only OpenCL devices may lack double precision")
    import dataclasses

    no_fp64 = dataclasses.replace(backend.device, extra={**backend.device.extra, "fp64": False})
    monkeypatch.setattr(backend, "_device", no_fp64)
    A, B = make_operands(Shape(4, 4, 4), SEED, np.float64)
    with pytest.raises(ValueError, match=r"no double precision \(cl_khr_fp64\)"):
        backend.matmul(A, B, variant="naive")


def test_bmm_batch_mismatch_is_a_clear_error(backend):
    A, _ = make_operands(Shape(4, 3, 5), SEED, batch=2)
    _, B = make_operands(Shape(4, 3, 5), SEED, batch=3)
    with pytest.raises(ValueError, match="batch sizes differ: 2 and 3"):
        backend.bmm(A, B, variant=backend.runnable_variants("bmm")[0])
