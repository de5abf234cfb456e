"""The diagnosis of a wrong product: each buggy kernel, emulated with NumPy the way it would
index A, B and C, is named for what it computed; a right result, garbage, and readings that
cannot differ from the product at a shape (B transposed where N or K is 1) are not."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from xbackend.grading.diagnosis import ALL_NAN, Launch, diagnose
from xbackend.problems import Reference, check

SHAPES = [(7, 13, 5), (33, 20, 17), (1, 64, 97), (40, 1, 24)]  # M, K, N
ONES = [(40, 1, 24), (5, 7, 1), (1, 1, 1), (9, 1, 1), (1, 5, 1), (1, 6, 8)]  # a dimension 1
Index = Callable[..., np.ndarray]  # (row, k), (k, col) or (row, col) -> flat index


def _operands(M: int, K: int, N: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Seeded float32 operands, none zero nor near it (a zero would hide a wrong index)."""
    rng = np.random.default_rng([seed, M, K, N])

    def draw(rows: int, columns: int) -> np.ndarray:
        signs = rng.choice([-1.0, 1.0], (rows, columns))
        return (signs * rng.uniform(0.25, 1.0, (rows, columns))).astype(np.float32)

    return draw(M, K), draw(K, N)


def _kernel(
    A: np.ndarray,
    B: np.ndarray,
    a_at: Index | None = None,
    b_at: Index | None = None,
    c_at: Index | None = None,
    stop: int | None = None,
    again: int | None = None,
    rows: int | None = None,
    columns: int | None = None,
    onto: np.ndarray | None = None,
) -> np.ndarray:
    """What a naive kernel leaves in C: one work-item per (row, col) of the launch (``rows``
    × ``columns``, guarded), a float32 sum over k < ``stop`` of A[a_at(row, k)] ·
    B[b_at(k, col)] (and term ``again`` once more), stored at C[c_at(row, col)], added onto
    ``onto``'s element there if given; C starts poisoned with NaN."""
    M, K = A.shape
    N = B.shape[1]
    a_at = a_at or (lambda row, k: row * K + k)
    b_at = b_at or (lambda k, col: k * N + col)
    c_at = c_at or (lambda row, col: row * N + col)
    row, col = np.meshgrid(np.arange(min(rows or M, M)), np.arange(min(columns or N, N)))
    C = np.full(M * N, np.nan, np.float32)
    start = np.zeros(row.shape, np.float32) if onto is None else onto.ravel()[c_at(row, col)]
    total = start.astype(np.float32)
    terms = list(range(K if stop is None else stop)) + ([] if again is None else [again])
    for k in terms:
        total += A.ravel()[a_at(row, k)] * B.ravel()[b_at(k, col)]
    C[c_at(row, col)] = total
    return C.reshape(M, N)


def _said(C: np.ndarray, A: np.ndarray, B: np.ndarray, **options: object) -> str:
    """The diagnosis of a result the check fails (so the test is of a real failure)."""
    assert not check(C, Reference.of(A, B)).equal
    said = diagnose(C, A, B, **options)  # type: ignore[arg-type]
    assert said == said.strip() and not said[:1].isupper()
    return said


@pytest.mark.parametrize("M, K, N", SHAPES + ONES)
def test_a_right_result_says_nothing(M, K, N):
    A, B = _operands(M, K, N)
    C = _kernel(A, B)
    assert check(C, Reference.of(A, B)).equal
    assert diagnose(C, A, B) == ""
    assert diagnose(C, A, B, tile=4, launch=Launch((8, 8), (16, 16))) == ""
    assert diagnose(C.astype(np.float64), A, B) == ""


@pytest.mark.parametrize("M, K, N", SHAPES + ONES)
def test_garbage_says_nothing(M, K, N):
    A, B = _operands(M, K, N)
    rng = np.random.default_rng(5)
    for garbage in (rng.standard_normal((M, N)), rng.uniform(-K, K, (M, N))):
        assert _said(garbage.astype(np.float32), A, B, tile=4) == ""


@pytest.mark.parametrize("M, K, N", [(7, 13, 5), (33, 20, 17), (1, 64, 97)])
def test_b_read_transposed(M, K, N):
    A, B = _operands(M, K, N)
    C = _kernel(A, B, b_at=lambda k, col: col * K + k)
    assert _said(C, A, B) == "equals A·Bᵀ read as B[col·K + k]: B is read transposed"


@pytest.mark.parametrize("M, K, N", [(7, 13, 5), (33, 20, 17), (12, 12, 12)])
def test_a_read_transposed(M, K, N):
    A, B = _operands(M, K, N)
    C = _kernel(A, B, a_at=lambda row, k: k * M + row)
    assert "A is read transposed" in _said(C, A, B)
    both = _kernel(A, B, a_at=lambda row, k: k * M + row, b_at=lambda k, col: col * K + k)
    assert "A and B are read transposed" in _said(both, A, B)


@pytest.mark.parametrize("M, K, N", ONES)
def test_no_transposed_claims_where_a_dimension_is_one(M, K, N):
    """A matrix read transposed where one of its dimensions is 1 is itself: never named."""
    A, B = _operands(M, K, N)
    impossible = [
        said
        for said, same in (
            ("B is read transposed", N == 1 or K == 1),
            ("A is read transposed", M == 1 or K == 1),
            ("A and B are read transposed", M == 1 or N == 1 or K == 1),
            ("C is written transposed", M == 1 or N == 1),
        )
        if same
    ]
    kernels = [
        _kernel(A, B, b_at=lambda k, col: col * K + k),
        _kernel(A, B, a_at=lambda row, k: k * M + row),
        _kernel(A, B, c_at=lambda row, col: col * M + row),
        _kernel(A, B, stop=K - 1),
        _kernel(A, B, onto=_kernel(A, B)),
        np.random.default_rng(1).standard_normal((M, N)).astype(np.float32),
    ]
    for C in kernels:
        said = diagnose(C, A, B)
        assert not any(words in said for words in impossible), said
        if check(C, Reference.of(A, B)).equal:
            assert said == ""
    if N == 1 or K == 1:
        assert diagnose(A @ B.reshape(N, K).T, A, B) == ""


@pytest.mark.parametrize(
    "M, K, N, tile, kept", [(7, 13, 5, 8, 8), (33, 20, 17, 16, 16), (1, 64, 97, 48, 48),
                            (40, 1, 24, 4, 0), (33, 70, 9, 32, 64)],
)  # fmt: skip
def test_a_dropped_partial_tile_of_k(M, K, N, tile, kept):
    A, B = _operands(M, K, N)
    C = _kernel(A, B, stop=K - K % tile)  # a tiled loop over K / TILE whole tiles only
    sums = f"sums only the first {kept} of {K}" if kept else f"sums none of its {K}"
    assert _said(C, A, B, tile=tile) == (
        f"{sums} products: the last partial tile of K (K mod TILE = {K % tile}) is dropped"
    )


@pytest.mark.parametrize("M, K, N", [(7, 13, 5), (33, 20, 17), (1, 64, 97)])
def test_a_sum_that_stops_early(M, K, N):
    A, B = _operands(M, K, N)
    assert _said(_kernel(A, B, stop=K - 1), A, B) == (
        f"sums only the first {K - 1} of {K} products: the last one is dropped (k < K - 1?)"
    )
    for stop in (1, K // 3, K // 2):
        assert _said(_kernel(A, B, stop=stop), A, B, tile=4).startswith(
            f"sums only the first {stop} of {K} products"
        )


@pytest.mark.parametrize("M, K, N", SHAPES)
def test_a_sum_counted_twice(M, K, N):
    A, B = _operands(M, K, N)
    C = _kernel(A, B, onto=_kernel(A, B))  # C += onto a result already there
    assert _said(C, A, B).startswith("equals 2·A·B")


@pytest.mark.parametrize("M, K, N", [(7, 13, 5), (33, 20, 17), (1, 64, 97)])
def test_a_term_counted_twice(M, K, N):
    A, B = _operands(M, K, N)
    for again in (0, K // 2, K - 1):
        said = _said(_kernel(A, B, again=again), A, B)
        assert said.startswith(f"equals A·B plus the term k = {again} once more")


@pytest.mark.parametrize("M, K, N", SHAPES)
def test_c_read_before_written_is_all_nan(M, K, N):
    A, B = _operands(M, K, N)
    C = _kernel(A, B, onto=np.full((M, N), np.nan, np.float32))  # C += onto the poison
    assert _said(C, A, B) == ALL_NAN
    said = _said(C, A, B, launch=Launch((1, 1), (16, 16)))
    assert said.startswith("the launch covered 16 rows × 16 columns") and said.endswith(ALL_NAN)


@pytest.mark.parametrize("M, K, N", [(7, 13, 5), (33, 20, 17), (40, 1, 24)])
def test_c_written_transposed(M, K, N):
    A, B = _operands(M, K, N)
    C = _kernel(A, B, c_at=lambda row, col: col * M + row)
    assert _said(C, A, B) == (
        "equals (A·B)ᵀ stored row by row, C[col·M + row]: C is written transposed"
    )


def test_wrong_only_in_the_last_partial_tile():
    A, B = _operands(33, 20, 17)
    right = _kernel(A, B)
    rows, columns, corner = right.copy(), right.copy(), right.copy()
    rows[32:] *= 0.5  # e.g. a guard that zeroes the last partial tile's loads of A
    columns[:, 16:] *= 0.5
    corner[32:, :] *= 0.5
    corner[:, 16:] *= 0.5
    tile = {"tile": 16}
    assert _said(rows, A, B, **tile) == (
        "is wrong only in the last partial tile of rows (from 32 on: M mod TILE = 1)"
    )
    assert "partial tile of columns (from 16 on: N mod TILE = 1)" in _said(columns, A, B, **tile)
    assert "partial tile of rows (from 32 on" in _said(corner, A, B, **tile)
    assert "and columns (from 16 on" in _said(corner, A, B, **tile)
    assert _said(rows, A, B) == "is wrong only in rows from 32 on"  # without TILE


def test_unwritten_rows_of_too_small_a_launch():
    A, B = _operands(33, 20, 17)
    launch = Launch(grid=(2, 1), group=(16, 16))  # 16 rows × 32 columns
    C = _kernel(A, B, rows=16, columns=32)
    assert _said(C, A, B, launch=launch) == (
        "the launch covered 16 rows × 32 columns of a 33×17 C (a grid of 2×1 groups of "
        "16×16); the kernel left rows from 16 on unwritten"
    )
    assert _said(C, A, B) == "the kernel left rows from 16 on unwritten"
    assert Launch((2, 1), (16, 16), x="rows").covered() == (32, 16)
    with pytest.raises(ValueError, match="columns"):
        Launch((1, 1), (1, 1), x="y")


@pytest.mark.parametrize("M, K, N", [(7, 13, 5), (33, 20, 17), (40, 1, 24)])
def test_unwritten_columns_and_corners(M, K, N):
    A, B = _operands(M, K, N)
    half_M, half_N = (M + 1) // 2, (N + 1) // 2
    columns = _said(_kernel(A, B, columns=half_N), A, B)
    assert columns == f"the kernel left columns from {half_N} on unwritten"
    corner = _said(_kernel(A, B, rows=half_M, columns=half_N), A, B)
    assert corner == f"the kernel wrote only the first {half_M} rows × {half_N} columns"


def test_unwritten_bands_and_blocks():
    A, B = _operands(64, 37, 96)
    right = _kernel(A, B)
    band = right.copy()
    band[:, [col for col in range(96) if col % 16 >= 12]] = np.nan  # 12 of each 16 written
    assert _said(band, A, B, tile=16) == "the kernel left columns 12–15 of every 16 unwritten"
    rows = right.copy()
    rows[[row for row in range(64) if row % 8 in (4, 5)]] = np.nan
    assert _said(rows, A, B) == "the kernel left rows 4–5 of every 8 unwritten"
    blocks = right.copy()
    blocks[3:6, 10:20] = blocks[40:41, 0:2] = np.nan
    assert _said(blocks, A, B) == "the kernel left 32 of 64×96 elements unwritten, in 2 blocks"
    blocks = right.copy()
    blocks[3:6, 10:20] = np.nan
    assert _said(blocks, A, B).endswith("in one block (rows 3–5, columns 10–19)")


def test_what_the_written_part_computed():
    A, B = _operands(33, 20, 17)
    transposed = _kernel(A, B, b_at=lambda k, col: col * 20 + k, rows=16)
    assert _said(transposed, A, B) == (
        "the kernel left rows from 16 on unwritten; where written, it equals A·Bᵀ read as "
        "B[col·K + k]: B is read transposed"
    )
    garbage = np.random.default_rng(2).standard_normal((33, 17)).astype(np.float32)
    garbage[16:] = np.nan
    assert _said(garbage, A, B) == "the kernel left rows from 16 on unwritten; the rest is wrong"


def test_the_earlier_reading_wins_where_two_fit():
    A, B = _operands(40, 1, 24)  # K = 1: twice the product is the one term once more
    assert _said(_kernel(A, B, again=0), A, B).startswith("equals 2·A·B")


def test_a_larger_product():
    A, B = _operands(200, 300, 150)
    assert _said(_kernel(A, B, stop=288), A, B, tile=32).startswith(
        "sums only the first 288 of 300 products: the last partial tile"
    )
    flat = (A.astype(np.float64) @ B).T.reshape(200, 150).astype(np.float32)
    assert "C is written transposed" in _said(flat, A, B)


def test_integer_products_are_exact():
    rng = np.random.default_rng(3)
    A, B = rng.integers(1, 8, (9, 11), np.int32), rng.integers(1, 8, (11, 6), np.int32)
    assert diagnose(A @ B, A, B) == ""
    assert diagnose(A @ B + 1, A, B) == ""
    assert diagnose(A[:, :10] @ B[:10], A, B).startswith("sums only the first 10 of 11")


def test_odd_inputs_never_raise():
    A, B = _operands(5, 3, 4)
    C = A @ B
    odd = [
        (np.zeros((0, 4)), np.zeros((0, 3)), B),
        (np.ones((5, 4)), np.zeros((5, 0)), np.zeros((0, 4))),
        (C.ravel(), A.ravel(), B.ravel()),
        (np.ones((3, 3)), A, B),
        (np.full((5, 4), np.inf), A, B),
        (np.full((5, 4), 1e308), A, B),
        (C, np.where(A > 0, np.inf, A), B),
        (C, np.where(A > 0, np.nan, A), B),
        (np.array([[None] * 4] * 5), A, B),
        (C * 1j, A, B),
        ("C", A, B),
        ([[1.0, 2.0], [3.0]], A, B),
    ]
    for C_odd, A_odd, B_odd in odd:
        for tile in (None, 0, -3, 2):
            assert isinstance(diagnose(C_odd, A_odd, B_odd, tile=tile), str)  # type: ignore[arg-type]
    assert diagnose(C, A, B, tile="x") == ""  # type: ignore[arg-type]
    assert diagnose(C.ravel() * 2, A, B).startswith("equals 2·A·B")  # a flat C reads as M×N
