"""Property-based: random operations, shapes, dtypes, variants and tiles against the reference."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import xbackend
from xbackend.launches.operands import SUPPORTED_DTYPES
from xbackend.problems import OPS, Reference, Shape, check, make_operands

dimensions = st.integers(min_value=1, max_value=70)


@pytest.mark.slow
@settings(
    max_examples=60,
    deadline=None,
    # The backend fixture is shared on purpose: opening a device per example would
    # measure driver start-up, not the kernels.
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(M=dimensions, K=dimensions, N=dimensions, data=st.data())
def test_any_shape_any_variant_any_tile(backend: xbackend.Backend, M, K, N, data):
    op = data.draw(st.sampled_from(OPS), label="op")
    dtype = data.draw(st.sampled_from(SUPPORTED_DTYPES), label="dtype")
    assume(backend.dtype_problem(dtype) is None)
    variant = data.draw(st.sampled_from(backend.runnable_variants(op, dtype)), label="variant")
    tiles = backend.tiles(variant, op, dtype.itemsize) or (None,)
    tile = data.draw(st.sampled_from(tiles), label="tile")
    seed = data.draw(st.integers(min_value=0, max_value=2**32 - 1), label="seed")
    if op == "rmm":  # even M and N
        M, N = 2 * ((M + 1) // 2), 2 * ((N + 1) // 2)
    batch = data.draw(st.integers(1, 3), label="batch") if op == "bmm" else None
    A, B = make_operands(Shape(M, K, N), seed, dtype, batch)
    result = backend.measure(A, B, variant, tile, op=op, warmup=0, samples=0).result
    verdict = check(result, Reference.of(A, B, op))
    assert verdict.equal, verdict
