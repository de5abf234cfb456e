"""The kernels' wide index: 64-bit element offsets for products that pass 32-bit ones.

The default build of every kernel file indexes with 32-bit ints; a product whose kernels
would form an offset past 2^31 - 1 gets the wide build (-DWIDE_INDEX), chosen from its
sizes alone (``plans.py``'s ``*_reach``). Here: every variant and operation computes
right in the wide build, forced at small sizes (``use_index("wide")``, as
``XBACKEND_INDEX=wide`` does); the choice falls exactly where the offsets pass 2^31 - 1,
shown on sizes and on planned products of 8 GB operands that are never allocated; the
arguments are packed as wide as the kernels declare them; and what no build can take
(a dimension past 32-bit ints, CLBlast's and cuBLAS's own limits) is refused by name.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import probe_under_oclgrind

import xbackend
from xbackend.backends.vendor import check_library, check_row_major
from xbackend.errors import UnsupportedParameter, XBackendError
from xbackend.launches import warp
from xbackend.launches.block_tiles import warp_reach
from xbackend.launches.kernels import WIDE_INDEX, index_parameters
from xbackend.launches.launch import Buffer, KernelLaunch
from xbackend.launches.operands import INDEX_MAX, MAX_DIMENSION, dimension_problem
from xbackend.launches.plans import Layout, index_options, pair_sums_reach, tiled_reach
from xbackend.problems import DTYPES, Reference, Shape, check, make_operands

ROOT = Path(__file__).resolve().parent.parent
SEED = 2027
COMPILED = ("opencl", "cuda")


def _compiled(backend: xbackend.Backend) -> None:
    if backend.name not in COMPILED:
        pytest.skip("the kernel files' backends only")


def _skip_unsupported(backend: xbackend.Backend, dtype: str) -> None:
    problem = backend.dtype_problem(DTYPES[dtype])
    if problem:
        pytest.skip(problem)


# -- every variant and operation, right in the wide build ----------------------------------

# Odd sizes (every edge guard runs; K > 32 loops every tile), a view whose rows are
# further apart than its columns (lda != K: the leading dimensions are 64-bit arguments
# too), and for bmm a batch of 3 (the z offsets).
_CASES = {
    "mm": [Shape(7, 5, 9), Shape(33, 70, 35)],
    "bmm": [Shape(7, 5, 9), Shape(33, 70, 35)],
    "rmm": [Shape(8, 5, 10), Shape(34, 70, 36)],
}


def _measured(backend, A, B, variant, tile, op, params=None):
    """Both outputs of a measurement (the first run and a later one), each computed into
    an output poisoned with NaN (the most negative int), and the check's reference."""
    measured = backend.measure(A, B, variant, tile, op=op, params=params, samples=1)
    return (measured.result, measured.last_result), Reference.of(A, B, op)


def _tiles(backend, variant, op, dtype):
    """Every tile in float32; in the other types, the one the variant runs by default: a
    tile changes the loops' bounds, not the offsets' arithmetic, which the element's size
    does (and every variant runs in every type)."""
    if dtype == np.float32:
        return backend.tiles(variant, op, dtype.itemsize) or (None,)
    return (backend.default_tile(variant, op, dtype),)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("op", list(_CASES))
def test_every_variant_and_tile_is_right_in_the_wide_build(backend, op, dtype):
    _compiled(backend)
    _skip_unsupported(backend, dtype)
    backend.use_index("wide")
    try:
        for number, shape in enumerate(_CASES[op]):
            batch = 3 if op == "bmm" else None
            A, B = make_operands(shape, SEED + number, DTYPES[dtype], batch=batch)
            if op == "mm":  # a view: rows K + 6 apart
                wide_rows = np.zeros((shape.M, shape.K + 6), A.dtype)
                wide_rows[:, 3 : 3 + shape.K] = A
                A = wide_rows[:, 3 : 3 + shape.K]
            for variant in backend.runnable_variants(op, A.dtype):
                if variant != "vendor" or op == "rmm":  # mm's vendor line runs no kernel
                    assert backend.index_bits(A, B, variant, op=op) == 64, variant
                for tile in _tiles(backend, variant, op, A.dtype):
                    outputs, reference = _measured(backend, A, B, variant, tile, op)
                    for output in outputs:
                        assert check(output, reference).equal, (variant, tile, shape)
    finally:
        backend.use_index(None)


@pytest.mark.parametrize("op", ["mm", "rmm"])
def test_the_tuned_variants_split_along_k_in_the_wide_build(backend, op):
    """A split product's second kernel (mm_sum_slices) and its workspace offsets, wide."""
    _compiled(backend)
    backend.use_index("wide")
    try:
        A, B = make_operands(Shape(66, 300, 72), SEED, np.dtype(np.float32))
        for variant in ("vec4_db", "warp_db"):
            config = warp.default_config(backend.variant_spec(variant, op).layout, 64)
            params = {**config.to_dict(), "slices": 3}
            outputs, reference = _measured(backend, A, B, variant, None, op, params)
            assert all(check(output, reference).equal for output in outputs), variant
    finally:
        backend.use_index(None)


def test_xbackend_index_wide_forces_the_wide_build(backend, monkeypatch):
    _compiled(backend)
    A, B = make_operands(Shape(9, 7, 5), SEED, np.dtype(np.float32))
    assert backend.index_bits(A, B, "tiled") == 32
    monkeypatch.setenv("XBACKEND_INDEX", "wide")
    assert backend.index_mode == "wide" and backend.index_bits(A, B, "tiled") == 64
    # Results measured so say it: the device's record of a backend opened now.
    assert all(d.extra.get("index") == "wide" for d in type(backend).list_devices())
    assert check(backend.matmul(A, B, "tiled"), Reference.of(A, B, "mm")).equal
    # The tuned variants' choices are keyed by what their code is built from.
    wide_build = backend.kernel_build("warp")
    monkeypatch.setenv("XBACKEND_INDEX", "auto")
    assert backend.kernel_build("warp") != wide_build
    monkeypatch.setenv("XBACKEND_INDEX", "64")
    with pytest.raises(XBackendError, match="XBACKEND_INDEX='64': set it to one of auto, wide"):
        backend.index_bits(A, B, "tiled")
    with pytest.raises(UnsupportedParameter, match="index mode 'narrow'"):
        backend.use_index("narrow")


# -- when the wide index is chosen: exactly where an offset passes 2^31 - 1 --------------


def _layout(M, K, N, *, lda=None, batch=1, reduced=False) -> Layout:
    """A layout by its sizes alone (no operands): A M×K with rows ``lda`` apart."""
    rows, columns = (M // 2, N // 2) if reduced else (M, N)
    strides = (M * K, K * N, M * N) if batch > 1 else (0, 0, 0)
    sizes = {
        "M": M, "N": N, "K": K, "lda": lda or K, "ldb": N, "ldc": columns,
        **dict(zip(("strideA", "strideB", "strideC"), strides, strict=True)),
    }  # fmt: skip
    empty = np.empty(0, np.float32)
    return Layout(empty, empty, batch, sizes, (rows, columns))


def _wide(reach: int) -> bool:
    return index_options(reach) == (WIDE_INDEX,)


def test_the_fixed_tile_kernels_go_wide_where_an_operand_passes_32_bit_offsets():
    # 46340² elements end at offset 2147395599; 46341² at 2147488280, past 2^31 - 1.
    assert not _wide(tiled_reach(_layout(46340, 46340, 46340), 16, False))
    assert _wide(tiled_reach(_layout(46341, 46341, 46341), 16, False))
    # Exactly 2^31 elements end at 2^31 - 1, the last offset an int holds: narrow.
    assert tiled_reach(_layout(2**16, 2**15, 1), 16, False) == INDEX_MAX
    assert not _wide(tiled_reach(_layout(2**16, 2**15, 1), 16, False))
    # One more element in a row, or rows one element further apart: wide.
    assert _wide(tiled_reach(_layout(2**16, 2**15 + 1, 1), 16, False))
    assert _wide(tiled_reach(_layout(2**16, 2**15, 1, lda=2**15 + 1), 16, False))
    # B or C alone can pass: K×N = 2^15 × (2^16 + 1), or an M×N output of 2^31 + 2^15.
    assert _wide(tiled_reach(_layout(1, 2**15, 2**16 + 1), 16, False))
    assert _wide(tiled_reach(_layout(2**16 + 1, 1, 2**15), 16, False))
    # A batch of small matrices passes together: 2^15 of 256×256 end at 2^31 - 1.
    assert not _wide(tiled_reach(_layout(256, 256, 256, batch=2**15), 16, False))
    assert _wide(tiled_reach(_layout(256, 256, 256, batch=2**15 + 1), 16, False))


def test_the_reduced_kernels_count_the_rows_their_last_tile_reaches():
    """rmm_tiled's threads below the last output row still form 2·row·lda: the rows
    rounded up to the tile count, not only those of A."""
    # A 46340 × 46340 ends at 2147395599, but its output's 23170 rows are 1449 tiles of
    # 16, and the last tile's last thread forms 2·23183·46340 = 2148600440.
    M = 46340
    tiles_16 = tiled_reach(_layout(M, M, M, reduced=True), 16, True)
    assert tiles_16 == 2 * (23184 - 1) * M > INDEX_MAX
    assert _wide(tiles_16)
    # At 46336 (output rows 23168, a multiple of 32) nothing reaches past A's last row.
    assert not _wide(tiled_reach(_layout(46336, 46336, 46336, reduced=True), 32, True))


def test_the_tuned_kernels_count_their_edge_tiles_and_slabs():
    config = warp.default_config("block", 128)
    # 46340² fits for naive and tiled, but mm_warp's edge tiles form C's pointers for rows
    # up to 46464 (363 tiles of 128): past 2^31 - 1.
    assert _wide(warp_reach(_layout(46340, 46340, 46340), config, 46340, 0))
    # 46336 is a multiple of 128: C ends where it ends, and B's slab below its last row
    # (8 rows) still fits.
    assert not _wide(warp_reach(_layout(46336, 46336, 46336), config, 46336, 0))
    # A split writes `slices` partial products of 2^15 × 2^14 = 2^29 outputs: 4 of them
    # end at 2^31 - 1, 5 pass it.
    layout = _layout(2**15, 1024, 2**14)
    assert not _wide(warp_reach(layout, config, 1024, 0))
    assert warp_reach(layout, config.with_slices(4), 256, 2**29) == INDEX_MAX
    assert _wide(warp_reach(layout, config.with_slices(5), 208, 2**29))
    # K + k_slice: the number of K ranges of a 1×2^30 · 2^30×1 product.
    assert _wide(warp_reach(_layout(1, 2**30 + 8, 1), config, 2**30 + 8, 0))


def test_the_pair_sums_reach_no_further_than_their_operands():
    """rmm's vendor line: the pair sums of A are half its elements, in blocks of 256."""
    at_2_31 = _layout(2**16, 2**15, 2, reduced=True)  # A: 2^31 elements, the last at 2^31 - 1
    assert pair_sums_reach(at_2_31) == INDEX_MAX and not _wide(pair_sums_reach(at_2_31))
    assert _wide(pair_sums_reach(_layout(2**16 + 2, 2**15, 2, reduced=True)))


@pytest.mark.parametrize(
    ("variant", "n", "bits"),
    [("naive", 46340, 32), ("tiled", 46341, 64), ("warp", 46340, 64), ("warp", 46336, 32)],
)
def test_a_planned_product_of_an_8_gb_output_chooses_as_its_sizes_say(backend, variant, n, bits):
    """n×1 · 1×n: an n×n output of 8 GB, planned (never allocated) by the backend."""
    _compiled(backend)
    A, B = np.ones((n, 1), np.float32), np.ones((1, n), np.float32)
    assert backend.index_bits(A, B, variant) == bits
    # The forced build is wide everywhere.
    backend.use_index("wide")
    try:
        assert backend.index_bits(A, B, variant) == 64
    finally:
        backend.use_index(None)


# -- the arguments, as wide as the kernels declare them -------------------------------------


def test_the_index_parameters_are_the_offsets_and_strides():
    assert index_parameters("mm", "mm_tiled") == {
        "lda", "ldb", "ldc", "strideA", "strideB", "strideC"
    }  # fmt: skip
    assert index_parameters("mm_warp", "mm_warp") >= {"k_slice", "lda", "strideC"}
    assert index_parameters("mm_warp", "mm_sum_slices") == {"ldc"}
    assert index_parameters("rmm", "rmm_pair_sums") == {"row_step", "col_step", "partner"}
    assert index_parameters("hold", "hold") == frozenset()


def _launch(options: tuple[str, ...], lda: int) -> KernelLaunch:
    return KernelLaunch.of(
        "mm_naive", "mm", options, (1, 1, 1), (1, 1, 1), A=Buffer("A"), B=Buffer("B"),
        C=Buffer("C"), M=3, N=4, K=5, lda=lda, ldb=4, ldc=4, strideA=0, strideB=0, strideC=0,
    )  # fmt: skip


def test_arguments_are_packed_as_wide_as_their_parameters():
    narrow = _launch(("-DTILE=16",), 2**31 - 1).values()
    assert [type(value) for value in narrow[3:]] == [np.int32] * 9
    wide = _launch(("-DTILE=16", WIDE_INDEX), 2**33 + 5).values()
    assert [type(value) for value in wide[3:6]] == [np.int32] * 3  # M, N, K
    assert [type(value) for value in wide[6:]] == [np.int64] * 6
    assert wide[6] == np.int64(2**33 + 5) and wide[:3] == [Buffer("A"), Buffer("B"), Buffer("C")]
    with pytest.raises(XBackendError, match="lda = 2147483648 does not fit its 32-bit"):
        _launch(("-DTILE=16",), 2**31).values()


# -- what no build takes, refused by name ----------------------------------------------------


def test_a_dimension_past_32_bit_ints_is_refused_without_allocating(backend):
    _compiled(backend)
    row = np.broadcast_to(np.float32(1), (1, MAX_DIMENSION + 1))  # no memory behind it
    column = np.broadcast_to(np.float32(1), (MAX_DIMENSION + 1, 1))
    assert "each at most 2147418112" in (dimension_problem(row, column) or "")
    assert dimension_problem(row[:, :MAX_DIMENSION], column[:MAX_DIMENSION]) is None
    with pytest.raises(UnsupportedParameter, match="A is 1×2147418113: the kernels count"):
        backend.index_bits(row, column, "naive")


def test_clblast_refuses_a_matrix_past_its_32_bit_offsets():
    """CLBlast's kernels offset with ints: the vendor line refuses, never computes wrong."""
    fits = {"M": 46340, "N": 46340, "K": 46340, "lda": 46340, "ldb": 46340, "ldc": 46340}
    check_library("CLBlast", fits, int32_offsets=True)
    with pytest.raises(UnsupportedParameter, match="CLBlast: A's last element lies 2147488280"):
        check_library("CLBlast", {**fits, "M": 46341, "K": 46341, "lda": 46341},
                      int32_offsets=True)  # fmt: skip
    with pytest.raises(ValueError, match="C's last element"):
        check_row_major(2**16 + 1, 2**15, 1, 1, 2**15, 2**15, int32_offsets=True)


def test_cublas_takes_large_matrices_whose_sizes_fit_ints():
    """cuBLAS's _v2 API takes int sizes and leading dimensions, and an operand of more
    than 2^31 elements while each fits (120000² on an 80 GB GPU)."""
    big = {"M": 120_000, "N": 120_000, "K": 120_000, "lda": 120_000, "ldb": 120_000,
           "ldc": 120_000}  # fmt: skip
    check_library("cuBLAS", big, int32=True)
    with pytest.raises(UnsupportedParameter, match="cuBLAS: lda = 2147483648 does not fit"):
        check_library("cuBLAS", {**big, "lda": 2**31}, int32=True)


def test_the_opencl_vendor_line_refuses_before_allocating(backend):
    if backend.name != "opencl":
        pytest.skip("CLBlast's line on OpenCL only")
    # The pair sums of A (92682×1) and B (1×92682), then a GEMM into C of 46341².
    A, B = np.ones((92682, 1), np.float32), np.ones((1, 92682), np.float32)
    product = backend._plan("rmm", "vendor", None, A, B)
    assert product.calls_library and len(product.launches) == 2
    with pytest.raises(UnsupportedParameter, match="CLBlast: C's last element lies 2147488280"):
        backend._check_product(product)


# -- the wide build, compiled and checked -----------------------------------------------------

_WARP_SWITCHES = [
    "-DLOCAL4 -DVEC4 -DDOUBLE_BUFFER",
    "-DLOCAL4 -DVEC4 -DREDUCED",
    "-DREAL=double -DDOUBLE_BUFFER -DREDUCED",
    "-DREAL=int -DLOCAL4 -DBM=64 -DBN=64 -DWM=32 -DWN=32 -DTN=4",
]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
@pytest.mark.parametrize("switches", _WARP_SWITCHES)
def test_mm_warp_compiles_wide_with_its_switches(switches, tmp_path):
    path = ROOT / "kernels" / "mm_warp" / "mm_warp.cu"
    done = subprocess.run(
        ["nvcc", "-ptx", "-arch=sm_90", WIDE_INDEX, *switches.split(), "-I",
         str(ROOT / "kernels" / "cuda"), str(path),
         "-o", str(tmp_path / "k")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert ".s64" in (tmp_path / "k").read_text()


# bmm: 5 fixed and 5 tuned variants, then the 5 tuned at the second size; rmm: 3 + 2 + 2.
_WIDE_CASES = {"bmm": 15, "rmm": 7}


@pytest.mark.slow
@pytest.mark.parametrize("op", list(_WIDE_CASES))
def test_the_wide_build_is_clean_under_oclgrind(oclgrind, op):
    """kernel_probe.py under oclgrind with every product wide, as tests/test_sanitizers.py
    runs the default build: bmm (mm's kernels, with batch offsets) and rmm, each in its
    own process (they run side by side), the fixed variants at tile 16 (reg2d_g4 needs 64:
    it runs wide in the tests above) and the tuned ones at 64, at one odd size and at the
    size whose inner tiles take unchecked loads. K = 17 loops a 16-wide tile twice and the
    8-deep slabs three times, each last trip partial (K = 40 looped more, proving no more)."""
    done = probe_under_oclgrind(
        oclgrind, "--ops", op, "--sizes", "17x17x19", "--tiles", "16", "--tuned-tiles", "64",
        env={"XBACKEND_INDEX": "wide"},
    )  # fmt: skip
    assert "Oclgrind Simulator" in done.stdout, done.stdout + done.stderr
    assert done.returncode == 0, done.stdout + done.stderr
    for report in ("data race", "Invalid read", "Invalid write", "Uninitialized value"):
        assert report not in done.stderr, done.stderr[-3000:]
    assert done.stdout.count("PASS") == _WIDE_CASES[op], done.stdout
