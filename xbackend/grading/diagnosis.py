"""What a wrong product most likely computed, in one sentence a student can act on.

A failed check says that a result is wrong, not how. Most wrong kernels compute something
recognisable: B or A read transposed, a sum cut short by a dropped partial tile, C stored
transposed, rows left unwritten by too small a launch. :func:`diagnose` tries those readings
in order and names the first that fits C to the check's own tolerance (``xbackend.problems``:
f(K)·eps·(|A|·|B|), each reading with its own magnitudes), never one that equals the product
at this shape (B transposed where N or K is 1). C is poisoned with NaN before the kernel
runs, so a NaN where the reference has none is unwritten or computed: ``check`` runs such a
kernel again into C poisoned with a finite value, and only the elements still holding it
are called unwritten (``untouched``); the others are NaN the kernel computed (read before
written). Those are described first, and the readings tried on the elements not NaN. A
reading is tried on a few rows before all of them, and where a sum stopped is pinned down
by a few elements' partial sums (O(K) each, not an O(M·N·K) search): a diagnosis costs
about two float64 products more than the check.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from xbackend.problems import tolerance_factor

__all__ = ["ALL_NAN", "ALL_UNWRITTEN", "COMPUTED", "COMPUTED_NAN", "Launch", "diagnose"]

Array = np.ndarray[Any, Any]
# A reading of the operands: its values and their magnitudes (|A|·|B| alike) on rows of C.
Reading = Callable[[Array], tuple[Array, Array]]

ALL_NAN = "every element is NaN: did the kernel read C (it starts as NaN) or leave it unwritten?"
ALL_UNWRITTEN = "the kernel left every element unwritten"
COMPUTED = "computed NaN: read before written?"
COMPUTED_NAN = COMPUTED + (
    " (the kernel wrote {count} of {M}×{N} elements as NaN: a second run into C poisoned "
    "with a finite value overwrote them)"
)
SAMPLE_ROWS = 8  # rows a reading is tried on before it is computed in full
PINNING_ELEMENTS = 4  # elements whose partial sums pin down where a sum stopped
MOST_CANDIDATES = 4  # stops or repeated terms tried in full, at most
MOST_RUNS = 100_000  # runs of unwritten elements beyond which blocks are not counted
MOST_PERIOD = 1024  # the longest period of unwritten bands looked for (TILE is tried first)
B_TRANSPOSED = "equals A·Bᵀ read as B[col·K + k]: B is read transposed"
A_TRANSPOSED = "equals Aᵀ·B read as A[k·M + row]: A is read transposed"
BOTH_TRANSPOSED = "equals Aᵀ·Bᵀ read as A[k·M + row], B[col·K + k]: A and B are read transposed"
TWICE = "equals 2·A·B: every product is summed twice (C added onto a result, or run twice?)"
REPEATED_TERM = "equals A·B plus the term k = {j} once more: check the bounds of the loop over k"
C_TRANSPOSED = "equals (A·B)ᵀ stored row by row, C[col·M + row]: C is written transposed"


@dataclasses.dataclass(frozen=True)
class Launch:
    """A 2-D launch as data: ``grid`` groups (CUDA blocks) along x and y, ``group``
    work-items (threads) per group along x and y, and whether x runs along C's
    ``"columns"`` or its ``"rows"``. Each work-item is taken to own one element of C."""

    grid: tuple[int, int]
    group: tuple[int, int]
    x: str = "columns"

    def __post_init__(self) -> None:
        if self.x not in ("columns", "rows"):
            raise ValueError(f"x runs along 'columns' or 'rows', not {self.x!r}")

    def covered(self) -> tuple[int, int]:
        """Rows and columns of C the launch has a work-item for."""
        along_x, along_y = self.grid[0] * self.group[0], self.grid[1] * self.group[1]
        return (along_y, along_x) if self.x == "columns" else (along_x, along_y)

    def describe(self, M: int, N: int) -> str:
        """What the launch covered of an M×N C, in words."""
        (gx, gy), (bx, by), (rows, columns) = self.grid, self.group, self.covered()
        grid = f"a grid of {gx}×{gy} groups of {bx}×{by}"
        return f"the launch covered {rows} rows × {columns} columns of a {M}×{N} C ({grid})"


def diagnose(
    C: Array, A: Array, B: Array, tile: int | None = None, launch: Launch | None = None,
    untouched: Array | None = None,
) -> str:  # fmt: skip
    """What a wrong result C (M×N, NaN where unwritten) of A (M×K) · B (K×N) most likely
    computed, as one sentence starting in lower case; "" where C is right or nothing fits.

    ``tile`` (the kernel's TILE) lets it name a dropped partial tile; ``launch`` lets it
    say what the launch covered. ``untouched`` (M×N booleans): where a second run into C
    poisoned with a finite value left that value; a NaN there is unwritten, elsewhere
    computed. Without it every NaN is taken as unwritten. It never raises: a diagnosis
    is a hint."""
    try:
        with np.errstate(all="ignore"):
            left = None if untouched is None else np.asarray(untouched, dtype=bool)
            return _diagnose(np.asarray(C), np.asarray(A), np.asarray(B), tile, launch, left)
    except Exception:  # odd inputs (ragged, object, complex): no hint rather than an error
        return ""


class _Problem:
    """The operands in float64, the check's tolerance, and the product, made once."""

    def __init__(self, C: Array, A: Array, B: Array) -> None:
        self.A, self.B = A.astype(np.float64), B.astype(np.float64)
        (self.M, self.K), self.N = A.shape, B.shape[1]
        self.C = C.astype(np.float64).reshape(self.M, self.N)
        exact = A.dtype.kind in "biu" and B.dtype.kind in "biu"
        floats = [array.dtype for array in (C, A, B) if array.dtype.kind == "f"]
        eps = 0.0 if exact or not floats else max(float(np.finfo(d).eps) for d in floats)
        self.scale = tolerance_factor(self.K) * eps
        self.tiny = 0.5 if exact else float(np.finfo(np.float32).tiny)  # integers: exact
        self.product = self.A @ self.B
        self.magnitude = np.abs(self.A) @ np.abs(self.B)
        self.written = ~(np.isnan(self.C) & ~np.isnan(self.product))
        picked = np.linspace(0, self.M - 1, min(self.M, SAMPLE_ROWS)).round()
        self.sample = np.unique(picked.astype(np.intp))

    def close(self, values: Array, magnitude: Array, rows: Array) -> Array:
        """Where C's ``rows`` hold ``values`` to the check's tolerance, or were not written."""
        found = self.C[rows]
        near = np.abs(found - values) <= self.scale * magnitude + self.tiny
        same = (found == values) | (np.isnan(found) & np.isnan(values))
        return np.asarray(near | same | ~self.written[rows])

    def fits(self, reading: Reading) -> bool:
        """Whether C's written elements hold ``reading``: on the sample rows, then on all."""
        if not self.close(*reading(self.sample), self.sample).all():
            return False
        every = np.arange(self.M)
        return bool(self.close(*reading(every), every).all())


def _diagnose(
    C: Array, A: Array, B: Array, tile: int | None, launch: Launch | None,
    untouched: Array | None,
) -> str:  # fmt: skip
    numbers = all(array.dtype.kind in "biuf" for array in (C, A, B))  # not complex, not objects
    shaped = numbers and A.ndim == B.ndim == 2 and A.shape[1] == B.shape[0]
    if not shaped or C.size != A.shape[0] * B.shape[1] or C.size == 0:
        return ""
    tile = int(tile) if tile is not None and int(tile) > 0 else None
    p = _Problem(C, A, B)
    if untouched is None and not p.written.any():
        coverage = "" if launch is None else launch.describe(p.M, p.N) + "; "
        return coverage + ALL_NAN
    nans = _nans(p, tile, launch, untouched)
    if not p.written.any():
        return nans
    wrong = ~p.close(p.product, p.magnitude, np.arange(p.M))
    if not wrong.any():
        return nans
    found = next((said for said, reading in _readings(p, tile) if p.fits(reading)), "")
    found = found or _border(wrong, tile)
    if not nans:
        return found
    where = "where written" if "computed NaN" not in nans else "where not NaN"
    return f"{nans}; " + (f"{where}, it {found}" if found else "the rest is wrong")


def _nans(p: _Problem, tile: int | None, launch: Launch | None, untouched: Array | None) -> str:
    """The NaNs where the product has none, in words: those left unwritten (still the
    poison of a second run, ``untouched``; every NaN where it is None), with what the
    launch covered, then those the kernel computed."""
    nan = ~p.written
    left = nan if untouched is None else nan & untouched.reshape(nan.shape)
    computed = nan & ~left
    said = []
    if left.any():
        coverage = "" if launch is None else launch.describe(p.M, p.N) + "; "
        said.append(coverage + (ALL_UNWRITTEN if left.all() else _unwritten(left, tile)))
    if computed.any():
        said.append(COMPUTED_NAN.format(count=int(computed.sum()), M=p.M, N=p.N))
    return "; ".join(said)


def _readings(p: _Problem, tile: int | None) -> Iterator[tuple[str, Reading]]:
    """The readings of the operands a wrong kernel most often computes, in order; each made
    only when the one before did not fit, and none that equals the product at this shape."""
    A, B, M, N, K = p.A, p.B, p.M, p.N, p.K
    At, Bt = A.reshape(K, M).T, B.reshape(N, K).T  # A[k·M + row], B[col·K + k]
    if N > 1 and K > 1:
        yield B_TRANSPOSED, _rows_times(A, Bt)
    if M > 1 and K > 1:
        yield A_TRANSPOSED, _rows_times(At, B)
    if M > 1 and N > 1 and K > 1:
        yield BOTH_TRANSPOSED, _rows_times(At, Bt)
    for k in _stops(p, tile):
        yield _stop_sentence(k, K, tile), _rows_times(A[:, :k], B[:k])
    yield TWICE, _rows_of(2 * p.product, 2 * p.magnitude)
    for j in _repeated_terms(p):
        yield REPEATED_TERM.format(j=j), _plus_term(p, j)
    if M > 1 and N > 1:
        yield C_TRANSPOSED, _rows_of(p.product.T.reshape(M, N), p.magnitude.T.reshape(M, N))


def _rows_times(left: Array, right: Array) -> Reading:
    return lambda rows: (left[rows] @ right, np.abs(left[rows]) @ np.abs(right))


def _rows_of(values: Array, magnitude: Array) -> Reading:
    return lambda rows: (values[rows], magnitude[rows])


def _plus_term(p: _Problem, j: int) -> Reading:
    def reading(rows: Array) -> tuple[Array, Array]:
        term = np.outer(p.A[rows, j], p.B[j])
        return p.product[rows] + term, p.magnitude[rows] + np.abs(term)

    return reading


def _stops(p: _Problem, tile: int | None) -> list[int]:
    """Where a sum cut short may have stopped: after the last whole tile, at K - 1, and at
    each k where the partial sums of a few written elements, spread over C, meet C there."""
    K, written = p.K, np.flatnonzero(p.written)
    picked = np.linspace(0, written.size - 1, min(written.size, PINNING_ELEMENTS)).round()
    fitting = np.ones(K + 1, dtype=bool)
    elements = np.unravel_index(written[picked.astype(np.intp)], (p.M, p.N))
    for row, column in zip(*elements, strict=True):
        terms = p.A[row] * p.B[:, column]
        sums = np.concatenate(([0.0], np.cumsum(terms)))
        sizes = np.concatenate(([0.0], np.cumsum(np.abs(terms))))
        fitting &= np.abs(sums - p.C[row, column]) <= p.scale * sizes + p.tiny
    found = np.flatnonzero(fitting[:K])[-MOST_CANDIDATES:].tolist()
    stops = [K - K % tile] if tile and K % tile else []
    return list(dict.fromkeys(k for k in [*stops, K - 1, *found] if 0 <= k < K))


def _stop_sentence(k: int, K: int, tile: int | None) -> str:
    if tile and K % tile and k == K - K % tile:
        why = f": the last partial tile of K (K mod TILE = {K % tile}) is dropped"
    else:
        why = ": the last one is dropped (k < K - 1?)" if k == K - 1 else ""
    if k == 0:  # K under one tile: the only tile is the partial one
        return f"sums none of its {K} products{why}"
    return f"sums only the first {k} of {K} products{why}"


def _repeated_terms(p: _Problem) -> list[int]:
    """The k whose product, added once more, would explain C's largest error."""
    errors = np.abs(p.C - p.product)
    errors[~p.written | ~np.isfinite(errors)] = -1.0
    row, column = np.unravel_index(int(np.argmax(errors)), errors.shape)
    terms = p.A[row] * p.B[:, column]
    miss = np.abs(terms - (p.C[row, column] - p.product[row, column]))
    bound = p.scale * (p.magnitude[row, column] + np.abs(terms)) + p.tiny
    return [int(j) for j in np.argsort(miss)[:MOST_CANDIDATES] if miss[j] <= bound[j]]


def _border(wrong: Array, tile: int | None) -> str:
    """Where the wrong elements lie, if only in the last rows or columns; else ""."""
    M, N = wrong.shape
    if tile:
        r0, c0 = M - M % tile, N - N % tile
        rows = f"rows (from {r0} on: M mod TILE = {M % tile})"
        columns = f"columns (from {c0} on: N mod TILE = {N % tile})"
        for fits, where in (
            (0 < r0 < M and not wrong[:r0].any(), rows),
            (0 < c0 < N and not wrong[:, :c0].any(), columns),
            (0 < r0 < M and 0 < c0 < N and not wrong[:r0, :c0].any(), f"{rows} and {columns}"),
        ):
            if fits:
                return f"is wrong only in the last partial tile of {where}"
    for noun, bad in (("rows", wrong.any(axis=1)), ("columns", wrong.any(axis=0))):
        first = int(np.argmax(bad))
        if first > 0 and bool(np.all(np.asarray(bad)[first:])):
            return f"is wrong only in {noun} from {first} on"
    return ""


def _unwritten(unwritten: Array, tile: int | None) -> str:
    """Which elements the kernel left unwritten: whole rows and columns where it can say,
    else how many and in how many blocks."""
    written = ~unwritten
    kept_rows, kept_columns = np.asarray(written.any(axis=1)), np.asarray(written.any(axis=0))
    if np.array_equal(written, kept_rows[:, None] & kept_columns[None, :]):
        rows, columns = _indices(~kept_rows, tile, "row"), _indices(~kept_columns, tile, "column")
        if rows is not None and columns is not None:
            if rows.startswith("rows from") and columns.startswith("columns from"):
                shown = f"{kept_rows.sum()} rows × {kept_columns.sum()} columns"
                return f"the kernel wrote only the first {shown}"
            return f"the kernel left {' and '.join(filter(None, (rows, columns)))} unwritten"
    M, N = unwritten.shape
    head = f"the kernel left {int(unwritten.sum())} of {M}×{N} elements unwritten"
    blocks = _blocks(unwritten)
    if blocks != 1:
        return f"{head}, " + ("scattered" if blocks is None else f"in {blocks} blocks")
    rows_at, columns_at = np.flatnonzero(unwritten.any(axis=1)), np.flatnonzero(unwritten.any(0))
    return f"{head}, in one block (rows {_span(rows_at)}, columns {_span(columns_at)})"


def _indices(chosen: Array, tile: int | None, noun: str) -> str | None:
    """A set of row (or column) indices in words ("" if empty): an interval, or a band
    repeated every T (TILE first); None where it is neither."""
    where, size = np.flatnonzero(chosen), chosen.size
    if where.size == 0:
        return ""
    if where[-1] - where[0] + 1 == where.size:
        if where[-1] == size - 1 and where[0] > 0:
            return f"{noun}s from {where[0]} on"
        return f"{noun}{'s' if where.size > 1 else ''} {_span(where)}"
    for period in ([tile] if tile else []) + list(range(2, min(size // 2, MOST_PERIOD) + 1)):
        band = np.flatnonzero(chosen[:period])
        repeats = 2 * period <= size and np.array_equal(chosen, np.resize(chosen[:period], size))
        if repeats and 0 < band.size < period and band[-1] - band[0] + 1 == band.size:
            return f"{noun}s {_span(band)} of every {period}"
    return None


def _span(indices: Array) -> str:
    first, last = int(indices[0]), int(indices[-1])
    return str(first) if first == last else f"{first}–{last}"


def _blocks(mask: Array) -> int | None:
    """Blocks of True elements (joined along an edge) in a mask, found by joining its runs
    along rows that overlap in the next row; None where there are too many runs."""
    steps = np.diff(np.pad(mask.astype(np.int8), ((0, 0), (1, 1))), axis=1)
    run_rows, run_starts = np.nonzero(steps == 1)
    if run_rows.size > MOST_RUNS:
        return None
    starts, ends = run_starts.tolist(), np.nonzero(steps == -1)[1].tolist()
    parent = list(range(run_rows.size))

    def root(run: int) -> int:
        while parent[run] != run:
            parent[run] = parent[parent[run]]
            run = parent[run]
        return run

    first = np.searchsorted(run_rows, np.arange(mask.shape[0] + 2)).tolist()
    for row in range(mask.shape[0] - 1):
        upper, lower = first[row], first[row + 1]
        while upper < first[row + 1] and lower < first[row + 2]:
            if starts[upper] < ends[lower] and starts[lower] < ends[upper]:
                parent[root(upper)] = root(lower)
            upper, lower = (upper + 1, lower) if ends[upper] < ends[lower] else (upper, lower + 1)
    return len({root(run) for run in range(run_rows.size)})
