"""Every variant of every backend against the float64 reference, on awkward shapes."""

from __future__ import annotations

import numpy as np
import pytest

import xbackend
from xbackend.launches.geometries import per_product
from xbackend.problems import Reference, Shape, check, make_operands

# Sizes that are not multiples of any tile, single elements, and M ≠ N ≠ K.
SHAPES = [
    Shape(1, 1, 1),
    Shape(7, 3, 7),
    Shape(17, 13, 17),
    Shape(33, 65, 1),
    Shape(1, 64, 33),
    Shape(65, 7, 33),
    Shape(16, 14, 16),
    Shape(100, 37, 129),
]
SEED = 20261122


def _cases(backend: xbackend.Backend) -> list[tuple[str, int | None]]:
    cases: list[tuple[str, int | None]] = []
    for variant in backend.runnable_variants():
        cases += [(variant, tile) for tile in backend.tiles(variant)] or [(variant, None)]
    return cases


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s.M}x{s.K}x{s.N}")
def test_every_variant_and_tile_matches_reference(backend: xbackend.Backend, shape: Shape):
    A, B = make_operands(shape, SEED)
    reference = Reference.of(A, B)
    for variant, tile in _cases(backend):
        # measure() poisons the output with NaN before each run and returns the
        # first and the last run's output; both must match.
        measured = backend.measure(A, B, variant, tile, warmup=0, samples=2, min_samples=2)
        for output in (measured.result, measured.last_result):
            verdict = check(output, reference)
            assert verdict.equal, (variant, tile, verdict)
            assert output.shape == (shape.M, shape.N)
            assert output.dtype == np.float32


def test_matmul_accepts_strided_views_and_fortran_order(backend: xbackend.Backend):
    rng = np.random.default_rng(SEED)
    big = rng.standard_normal((40, 50)).astype(np.float32)
    A = big[3:20, 5:36]  # a strided view
    B = np.asfortranarray(rng.standard_normal((31, 9)).astype(np.float32))
    for variant in backend.runnable_variants():
        C = backend.matmul(A, B, variant=variant)
        assert check(C, Reference.of(A, B)).equal, variant


def test_timings_are_positive_and_counted(backend: xbackend.Backend):
    A, B = make_operands(Shape(48, 40, 32), SEED)
    measured = backend.measure(A, B, backend.runnable_variants()[0], samples=4, min_samples=4)
    assert len(measured.kernel_s) == len(measured.end_to_end_s) == 4
    assert all(t > 0 for t in measured.kernel_s)
    # No comparison of the two: a short kernel's time is its batch's, run after the one
    # product timed end to end (measuring/sampler.py), so on a loaded host either may be
    # the longer; comparing two timings in a test is a flake.
    assert all(e > 0 for e in measured.end_to_end_s)


def test_bad_operands_are_clear_errors(backend: xbackend.Backend):
    A, B = make_operands(Shape(5, 4, 3), SEED)
    variant = backend.runnable_variants()[0]
    with pytest.raises(ValueError, match="inner dimensions"):
        backend.matmul(A, B.T.copy(), variant=variant)
    with pytest.raises(ValueError, match="2-D"):
        backend.matmul(A[0], B, variant=variant)
    with pytest.raises(ValueError, match="supported: int32, float32, float64"):
        backend.matmul(A.astype(np.complex64), B, variant=variant)
    with pytest.raises(ValueError, match=r"no variant 'fastest'.*it has"):
        backend.matmul(A, B, variant="fastest")


def test_unrunnable_tile_names_the_runnable_ones(backend: xbackend.Backend):
    tiled = [v for v in backend.runnable_variants() if backend.variant_spec(v).takes_tile]
    if not tiled:
        pytest.skip(f"{backend.name} has no variant with a tile")
    A, B = make_operands(Shape(5, 4, 3), SEED)
    with pytest.raises(ValueError, match="tile must be a positive integer"):
        backend.matmul(A, B, variant=tiled[0], tile=0)
    if backend.device.max_work_group_size:  # a device with a work-group limit
        with pytest.raises(ValueError, match=r"cannot run on .*tiles this device can run: 8"):
            backend.matmul(A, B, variant=tiled[0], tile=4097)


def test_device_is_described(backend: xbackend.Backend):
    device = backend.device
    assert device.name
    assert device.kind in ("cpu", "gpu", "accelerator", "other")
    assert set(device.to_dict()) >= {"name", "driver_version", "global_mem_bytes"}


# Tuned variants (kernels/mm_warp) with explicit parameters: every layout, a split
# along K into ranges that end inside a slab and past K, unaligned and aligned rows,
# and edge tiles whose overhanging rows and 4-column pieces load unchecked from
# clamped addresses (N a multiple of 4: 131×68, and 64×132 below).
TUNED_CASES = [
    ({"BM": 64, "BN": 64, "BK": 8, "TM": 8, "TN": 4}, Shape(65, 700, 33)),
    ({"BM": 128, "BN": 64, "BK": 8, "TM": 8, "TN": 8}, Shape(131, 40, 68)),
    ({"BM": 128, "BN": 64, "BK": 16, "TM": 8, "TN": 8, "slices": 3}, Shape(130, 701, 67)),
    ({"BM": 64, "BN": 128, "BK": 8, "TM": 8, "TN": 8, "slices": 4}, Shape(64, 1000, 132)),
    ({"BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 8, "slices": 6}, Shape(33, 301, 17)),
]


@pytest.mark.slow
@pytest.mark.parametrize("op", ["mm", "rmm"])
@pytest.mark.parametrize("params, shape", TUNED_CASES, ids=lambda x: str(x))
def test_tuned_variants_with_explicit_parameters_and_split_k(backend, params, shape, op):
    tuned = [v for v in backend.runnable_variants(op) if per_product(backend.variant_spec(v, op))]
    if not tuned:
        pytest.skip(f"{backend.name} has no tuned variants of {op}")
    if op == "rmm":  # twice the rows and columns: the same output, pair-summed operands
        shape = Shape(2 * shape.M, shape.K, 2 * shape.N)
    A, B = make_operands(shape, SEED)
    reference = Reference.of(A, B, op)
    for variant in tuned:
        layout = backend.variant_spec(variant, op).layout
        chosen = dict(params)
        if layout == "block":
            chosen |= {"WM": params["BM"], "WN": params["BN"]}
        else:  # one warp of 4×8 threads per group
            chosen |= {"WM": 4 * params["TM"], "WN": 8 * params["TN"]}
        measured = backend.measure(A, B, variant, op=op, params=chosen, warmup=0, samples=1)
        assert measured.params is not None
        requested, ran = params.get("slices", 1), measured.params["slices"]
        assert 1 <= ran <= requested and (ran > 1) == (requested > 1)  # the split really ran
        for output in (measured.result, measured.last_result):
            verdict = check(output, reference)
            assert verdict.equal, f"{variant} {chosen}: {verdict}"


def test_tuned_parameters_are_checked(backend):
    if "vec4" not in backend.variants():
        pytest.skip(f"{backend.name} has no tuned variants")
    A, B = make_operands(Shape(8, 8, 8), SEED)
    with pytest.raises(xbackend.UnsupportedParameter, match="multiples of 4"):
        backend.measure(A, B, "vec4", params={"TM": 6}, samples=0)
    with pytest.raises(xbackend.UnsupportedParameter, match="unknown mm_warp parameters"):
        backend.measure(A, B, "vec4", params={"TILE": 64}, samples=0)
    with pytest.raises(xbackend.UnsupportedParameter, match="takes no parameter BM"):
        backend.measure(A, B, "tiled", params={"BM": 64}, samples=0)
