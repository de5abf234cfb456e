"""Property-based: random shapes, variants and tiles against the reference, on every backend."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import xbackend
from xbackend.backends.base import SUPPORTED_DTYPES
from xbackend.problems import Reference, Shape, check, make_operands

dimensions = st.integers(min_value=1, max_value=70)


@settings(
    max_examples=40,
    deadline=None,
    # The backend fixture is shared on purpose: opening a device per example would
    # measure driver start-up, not the kernels.
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(M=dimensions, K=dimensions, N=dimensions, data=st.data())
def test_any_shape_any_variant_any_tile(backend: xbackend.Backend, M, K, N, data):
    variant = data.draw(st.sampled_from(backend.variants()), label="variant")
    tile = data.draw(st.sampled_from(backend.tiles(variant) or (None,)), label="tile")
    dtype = data.draw(st.sampled_from(SUPPORTED_DTYPES), label="dtype")
    seed = data.draw(st.integers(min_value=0, max_value=2**32 - 1), label="seed")
    A, B = make_operands(Shape(M, K, N), seed, dtype)
    verdict = check(backend.matmul(A, B, variant=variant, tile=tile), Reference.of(A, B))
    assert verdict.equal, verdict
