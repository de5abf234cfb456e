"""Every variant of every operation, checked against the float64 reference.

Integer products are checked exactly, on operands as wide as int32 allows for the
shape: every sum (and every partial sum) stays within int32, but most pass 2**24, so an
int32 product computed in float32 (exact only below 2**24) fails. Each shape and dtype
is also run on two sets of operands, so a backend that answers a repeated shape with
an earlier result fails.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import xbackend
from xbackend.operations import OPERATIONS, Operation, Shape
from xbackend.problems import DTYPES, Reference, check

# M, K, N: ones, primes, and sizes one past a power of two, never square.
SHAPES = [Shape(1, 1, 1), Shape(7, 5, 3), Shape(33, 17, 65)]
BATCH = 3
SEED = 20240611
INT32_MAX = 2**31 - 1


def fitted(op: Operation, shape: Shape) -> Shape:
    """``shape``, with M and N made even where the operation needs it (rmm)."""
    if op.shape_problem(shape.M, shape.N) is None:
        return shape
    return Shape(shape.M + shape.M % 2, shape.K, shape.N + shape.N % 2)


def usable_dtype(backend: xbackend.Backend, name: str) -> np.dtype[Any]:
    dtype = DTYPES[name]
    problem = backend.dtype_problem(dtype)
    if problem:
        pytest.skip(f"{backend.name} cannot compute in {name}: {problem}")
    return dtype


def wide_operands(
    op: Operation, shape: Shape, seed: int, dtype: np.dtype[Any]
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Seeded operands of ``op`` at ``shape``: floats as ``op.operands`` draws them;
    integers uniform in ±m, m as large as keeps every sum of ``op.terms(K)`` products
    within int32 (xbackend's own ±8 keep every sum below 2**24, where float32 is exact)."""
    if dtype.kind != "i":
        return op.operands(shape, seed, dtype, BATCH)
    m = math.isqrt(INT32_MAX // op.terms(max(shape.K, 1)))
    rng = np.random.default_rng([seed, shape.M, shape.K, shape.N, dtype.num])
    lead = (BATCH,) if op.batched else ()
    A = rng.integers(-m, m + 1, (*lead, shape.M, shape.K)).astype(dtype)
    B = rng.integers(-m, m + 1, (*lead, shape.K, shape.N)).astype(dtype)
    return A, B


def assert_equal_to_reference(
    backend: xbackend.Backend, op: Operation, variant: str, A: Any, B: Any
) -> None:
    result = backend.measure(A, B, variant, op=op.name, warmup=0, samples=0).result
    verdict = check(result, Reference.of(np.asarray(A), np.asarray(B), op))
    assert verdict.equal, (
        f"{backend.name} {variant} {op.name} {A.shape}·{B.shape} {A.dtype}: {verdict}"
    )


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s.M}x{s.K}x{s.N}")
@pytest.mark.parametrize("op", list(OPERATIONS.values()), ids=lambda op: op.name)
def test_every_variant_equals_the_reference(
    backend: xbackend.Backend, op: Operation, shape: Shape, dtype_name: str
) -> None:
    dtype = usable_dtype(backend, dtype_name)
    variants = backend.runnable_variants(op.name, dtype)
    if not variants:
        pytest.skip(f"{backend.name} runs no variant of {op.name} in {dtype_name}")
    A, B = wide_operands(op, fitted(op, shape), SEED, dtype)
    for variant in variants:
        assert_equal_to_reference(backend, op, variant, A, B)


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("op", list(OPERATIONS.values()), ids=lambda op: op.name)
def test_fresh_operands_for_a_repeated_shape(
    backend: xbackend.Backend, op: Operation, dtype_name: str
) -> None:
    """Two sets of operands of one shape and dtype, each against its own reference: a
    backend that remembers results by shape and dtype answers the second with the first."""
    dtype = usable_dtype(backend, dtype_name)
    shape = fitted(op, SHAPES[-1])
    variants = backend.runnable_variants(op.name, dtype)
    if not variants:
        pytest.skip(f"{backend.name} runs no variant of {op.name} in {dtype_name}")
    for variant in variants:
        for seed in (SEED + 1, SEED + 2):
            A, B = wide_operands(op, shape, seed, dtype)
            assert_equal_to_reference(backend, op, variant, A, B)


@pytest.mark.parametrize("op", list(OPERATIONS.values()), ids=lambda op: op.name)
def test_strided_views(backend: xbackend.Backend, op: Operation) -> None:
    """Sub-matrices, column steps and transposes: the values count, not the layout."""
    shape = fitted(op, Shape(9, 11, 6))
    lead = (BATCH,) if op.batched else ()
    rng = np.random.default_rng(SEED)
    big_A = rng.uniform(-1, 1, (*lead, shape.M + 3, 2 * shape.K + 5)).astype(np.float32)
    big_B = rng.uniform(-1, 1, (*lead, shape.N, shape.K + 2)).astype(np.float32)
    A = big_A[..., 2 : 2 + shape.M, 1 : 1 + 2 * shape.K : 2]  # rows cut, every other column
    B = np.swapaxes(big_B, -1, -2)[..., 1 : 1 + shape.K, :]  # a transpose, rows cut
    assert not (A.flags.c_contiguous or B.flags.c_contiguous)
    for variant in backend.runnable_variants(op.name, np.float32):
        assert_equal_to_reference(backend, op, variant, A, B)


@pytest.mark.parametrize(("M", "K", "N"), [(0, 3, 4), (4, 3, 0), (4, 0, 6)])
def test_zero_sized_dimensions(backend: xbackend.Backend, M: int, K: int, N: int) -> None:
    """What NumPy gives: an empty matrix, or zeros where K is 0."""
    A, B = np.ones((M, K), np.float32), np.ones((K, N), np.float32)
    for variant in backend.runnable_variants("mm", np.float32):
        result = backend.matmul(A, B, variant=variant)
        assert result.shape == (M, N) and result.dtype == np.float32
        np.testing.assert_array_equal(result, np.zeros((M, N), np.float32))


@pytest.mark.parametrize("op", list(OPERATIONS.values()), ids=lambda op: op.name)
def test_poison_fills_the_whole_output(backend: xbackend.Backend, op: Operation) -> None:
    """Before every run the output is poisoned, so an element a kernel misses fails the
    check instead of passing with a stale value."""
    A, B = op.operands(fitted(op, Shape(7, 5, 3)), SEED, np.float32, BATCH)
    for variant in backend.runnable_variants(op.name, np.float32):
        tile = backend.resolve_tile(variant, None, op.name, A.dtype)
        execution = backend._execution(op.name, variant, tile, A, B)
        try:
            execution.upload()
            execution.poison()
            output = execution.download()
        finally:
            execution.release()
        assert output.shape == op.output_shape(A, B)
        assert np.isnan(output).all(), f"{variant}: poison() left values other than NaN"
