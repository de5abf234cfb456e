"""Freivalds' check: it passes correct results, catches wrong ones, agrees with the full
check where both run, and is chosen, recorded and sized as ``--check`` says."""

from __future__ import annotations

import csv
import dataclasses
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import xbackend_here

import xbackend.sweep.measure as measure
from xbackend.backends.cpu import CpuBackend, _HostExecution
from xbackend.measuring.timing import Sampling
from xbackend.operations import operation
from xbackend.problems import (
    AUTO,
    FREIVALDS,
    FREIVALDS_ABOVE_FLOPS,
    FULL,
    Freivalds,
    Reference,
    Shape,
    check,
    check_method,
    make_operands,
)
from xbackend.results import PointRecord
from xbackend.sweep.configs import Config
from xbackend.sweep.runner import Plan, run

ROOT = Path(__file__).resolve().parent.parent


def xb(*args: str) -> subprocess.CompletedProcess[str]:
    """The command in this process: what it says and writes is what these tests read."""
    return xbackend_here(*args)


def _product(op: str, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """The product as a correct kernel computes it: in the operands' own type (BLAS)."""
    found = operation(op)
    return found.fold_rows(A) @ found.fold_columns(B)


def _both(C: np.ndarray, A: np.ndarray, B: np.ndarray, op: str = "mm", seed: int = 1):
    return check(C, Reference.of(A, B, op)), check(C, Freivalds.of(A, B, op, seed=seed))


# -- correct results pass, well inside the bound -----------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("op", ["mm", "bmm", "rmm"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_correct_product_passes_well_inside_the_bound(op, dtype):
    batch = 3 if operation(op).batched else None
    for seed, shape in enumerate([Shape(2, 1, 2), Shape(64, 3000, 48), Shape(130, 257, 66)]):
        A, B = make_operands(shape, seed, dtype, batch)
        verdict = check(_product(op, A, B), Freivalds.of(A, B, op, seed=seed))
        assert verdict.equal and verdict.method == FREIVALDS, (shape, verdict)
        if shape.K > 16:  # at K = 1 the bound is the worst case: a correct product ends ≤ 0.5
            assert 0 < verdict.bound_ratio < 0.1 and verdict.max_abs_error > 0, verdict


@pytest.mark.parametrize("op", ["mm", "bmm", "rmm"])
def test_an_integer_product_must_be_exact(op):
    batch = 2 if operation(op).batched else None
    A, B = make_operands(Shape(40, 500, 36), 4, np.int32, batch)
    C = _product(op, A, B)
    assert C.dtype == np.int32
    sketch = Freivalds.of(A, B, op)
    verdict = check(C, sketch)
    assert verdict.equal and verdict.max_abs_error == 0.0 and verdict.bound_ratio == 0.0
    C.flat[C.size // 2] += 1  # off by one unit in one element
    wrong = check(C, sketch)
    assert not wrong.equal and wrong.max_abs_error == 1.0 and wrong.bound_ratio == 2.0


# -- wrong results are caught -------------------------------------------------------------


@pytest.mark.slow
def test_one_wrong_element_is_caught_at_large_k():
    A, B = make_operands(Shape(256, 50_000, 256), 11)
    C = A @ B  # float32, by BLAS
    sketch = Freivalds.of(A, B, seed=2)
    assert check(C, sketch).bound_ratio < 1e-3
    # About 13 standard deviations of C's elements, 5 times this row's bound (~200: see
    # problems' docstring on resolution; the full check's tolerance here is ~1.3).
    C[97, 201] += 1000.0
    full, freivalds = check(C, Reference.of(A, B)), check(C, sketch)
    assert not full.equal and not freivalds.equal and freivalds.bound_ratio > 2, freivalds
    assert freivalds.max_abs_error == pytest.approx(1000.0, rel=0.01)


def test_an_unwritten_element_is_caught():
    A, B = make_operands(Shape(64, 1000, 64), 5)
    C = A @ B
    C[3, 60] = np.nan  # what a poisoned, never-written element looks like
    verdict = check(C, Freivalds.of(A, B))
    assert not verdict.equal and verdict.nan_count == 1 and verdict.bound_ratio == np.inf


def test_a_dropped_term_is_caught_at_large_k():
    # Where the full check stands at about 30 times its tolerance (tests/test_check.py).
    A, B = make_operands(Shape(256, 4096, 256), 5)
    sketch = Freivalds.of(A, B, seed=3)
    assert check(A @ B, sketch).equal
    dropped = check(A[:, :-1] @ B[:-1, :], sketch)
    assert not dropped.equal and dropped.bound_ratio > 2, dropped


@pytest.mark.slow
@pytest.mark.parametrize("K", [16_384, 24_000])
def test_a_dropped_term_is_caught_where_the_sketch_alone_would_miss_it(K):
    """At K = 16384 the row sums alone stand at 0.63 of their bound (problems' docstring):
    the rows checked in full catch what runs along every row."""
    A, B = make_operands(Shape(128, K, 128), 17)
    sketch = Freivalds.of(A, B, seed=4)
    assert check(A @ B, sketch).equal
    dropped = check(A[:, :-1] @ B[:-1, :], sketch)
    assert not dropped.equal and dropped.bound_ratio > 1.5, dropped


@pytest.mark.slow
def test_a_small_error_in_a_row_checked_in_full_is_caught():
    A, B = make_operands(Shape(96, 20_000, 96), 23)
    C = A @ B
    sketch = Freivalds.of(A, B, seed=5)
    assert sketch.rows is not None and sketch.row_magnitude is not None
    row = int(sketch.rows[0, 0])
    # Twice the full check's tolerance of that element: far inside the row sum's bound.
    tolerance = 4 * np.sqrt(20_000) * np.finfo(np.float32).eps * sketch.row_magnitude[0, 0, 7]
    C[row, 7] += np.float32(2 * tolerance)
    verdict = check(C, sketch)
    assert not verdict.equal and 1.5 < verdict.bound_ratio < 3, verdict


@pytest.mark.parametrize("op", ["bmm", "rmm"])
def test_a_dropped_term_and_a_wrong_element_are_caught_in_bmm_and_rmm(op):
    batch = 3 if operation(op).batched else None
    A, B = make_operands(Shape(64, 2000, 48), 6, np.float32, batch)
    sketch = Freivalds.of(A, B, op, seed=4)
    assert check(_product(op, A, B), sketch).equal
    dropped = check(_product(op, A[..., :-1], B[..., :-1, :]), sketch)
    assert not dropped.equal and dropped.bound_ratio > 2, dropped
    wrong = _product(op, A, B)
    wrong[(-1, 5, 7) if batch else (5, 7)] += 50.0  # in the last product of a batch
    assert not check(wrong, sketch).equal


def test_errors_that_cancel_in_one_vector_are_caught_by_the_others():
    # +d and -d in one row cancel for every x with equal signs there: half of them.
    A, B = make_operands(Shape(32, 100, 32), 8)
    for seed in range(5):
        C = A @ B
        C[4, 1] += 0.5
        C[4, 2] -= 0.5
        assert not check(C, Freivalds.of(A, B, seed=seed)).equal, seed


def test_a_wrong_shape_fails():
    A, B = make_operands(Shape(16, 8, 12), 1)
    verdict = check((A @ B)[:-1], Freivalds.of(A, B))
    assert not verdict.equal and verdict.method == FREIVALDS


def test_the_vectors_are_seeded():
    A, B = make_operands(Shape(8, 6, 10), 1)
    first, again, other = (Freivalds.of(A, B, seed=s) for s in (1, 1, 2))
    np.testing.assert_array_equal(first.vectors, again.vectors)
    assert not np.array_equal(first.vectors, other.vectors)
    assert set(np.unique(first.vectors)) == {-1.0, 1.0}


# -- agreement with the full check --------------------------------------------------------

GRID = [Shape(2, 1, 2), Shape(8, 7, 6), Shape(34, 33, 18), Shape(64, 300, 40)]


@pytest.mark.parametrize("op", ["mm", "bmm", "rmm"])
@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.float64])
def test_the_full_check_and_freivalds_agree_on_small_cases(op, dtype):
    batch = 2 if operation(op).batched else None
    for seed, shape in enumerate(GRID):
        A, B = make_operands(shape, seed, dtype, batch)
        C = _product(op, A, B)
        full, freivalds = _both(C, A, B, op, seed)
        assert full.equal and freivalds.equal, (shape, full, freivalds)
        where = tuple(n // 3 for n in C.shape)
        C[where] += 1
        full, freivalds = _both(C, A, B, op, seed)
        assert not full.equal and not freivalds.equal, (shape, full, freivalds)


# -- which check runs, and what the records say ------------------------------------------


def test_auto_checks_in_full_up_to_the_threshold_or_where_the_reference_does_not_fit():
    assert check_method(AUTO, FREIVALDS_ABOVE_FLOPS) == FULL
    assert check_method(AUTO, FREIVALDS_ABOVE_FLOPS + 1) == FREIVALDS
    assert check_method(AUTO, 1000, full_fits=False) == FREIVALDS
    assert check_method(FULL, 2 * FREIVALDS_ABOVE_FLOPS, full_fits=False) == FULL
    assert check_method(FREIVALDS, 1000) == FREIVALDS
    with pytest.raises(ValueError, match="unknown check"):
        check_method("sometimes", 1000)
    # The presets' sizes: 8192³ in full, 16384³ with Freivalds' (mm and rmm alike).
    mm, rmm = operation("mm"), operation("rmm")
    assert check_method(AUTO, mm.flops(Shape(8192, 8192, 8192))) == FULL
    assert check_method(AUTO, mm.flops(Shape(16384, 16384, 16384))) == FREIVALDS
    assert check_method(AUTO, rmm.flops(Shape(8192, 8192, 8192))) == FULL
    assert check_method(AUTO, rmm.flops(Shape(16384, 16384, 16384))) == FREIVALDS


def _config(op: str = "mm", dtype: str = "float32", monkeypatch=None) -> Config:
    backend = CpuBackend()
    if monkeypatch is not None:  # a device that holds anything: only the host is counted
        roomy = dataclasses.replace(backend.device, global_mem_bytes=None, max_alloc_bytes=None)
        monkeypatch.setattr(backend, "_device", roomy)
    return Config("cpu", backend, op, "vendor", None, dtype)


def test_freivalds_needs_no_float64_copies_of_the_host(monkeypatch):
    shape, op = Shape(16384, 16384, 16384), operation("mm")
    full = measure.host_bytes(op, shape, 1, 4, FULL)
    freivalds = measure.host_bytes(op, shape, 1, 4, FREIVALDS)
    # A, B and two outputs of 1 GiB each (and a float64 draw of A while it is made); the
    # full check adds float64 matrices of 2 GiB each.
    assert 4 * 2**30 < freivalds <= 6 * 2**30 and full >= 16 * 2**30
    config = _config(monkeypatch=monkeypatch)
    monkeypatch.setattr(measure, "_available_host_bytes", lambda: 8 * 2**30)
    assert measure.chosen_check(op, "float32", shape, 1) == FREIVALDS
    assert measure.memory_problem(config, shape, 1) is None
    refused = measure.memory_problem(config, shape, 1, FULL)
    assert refused and "float64 reference" in refused and "--check freivalds" in refused
    # Where even Freivalds' cannot fit, the point is refused all the same.
    monkeypatch.setattr(measure, "_available_host_bytes", lambda: 2**30)
    refused = measure.memory_problem(config, shape, 1)
    assert refused and "Freivalds" in refused
    # A small point with room to spare keeps the full check under auto.
    monkeypatch.setattr(measure, "_available_host_bytes", lambda: 8 * 2**30)
    assert measure.chosen_check(op, "float32", Shape(4096, 4096, 4096), 1) == FULL
    # Chosen once per size: what a first reference takes of the host changes nothing.
    inputs = measure.Inputs(Shape(4096, 4096, 4096), 0, 1)
    assert inputs.check_for(op, "float32") == FULL
    monkeypatch.setattr(measure, "_available_host_bytes", lambda: 2**20)
    assert inputs.check_for(op, "float32") == FULL
    assert measure.chosen_check(op, "float32", Shape(4096, 4096, 4096), 1) == FREIVALDS


class _DroppingBackend(CpuBackend):
    """Drops the last term of every dot product: a classic off-by-one."""

    name = "wrong"

    def _execution(self, op, variant, tile, A, B, params=None):
        return _HostExecution(op, variant, tile, A[..., :-1].copy(), B[..., :-1, :].copy())


SHAPES = [Shape(8, 7, 8), Shape(40, 300, 24)]


def _sweep(tmp_path, opened, **plan):
    plan_ = Plan(
        shapes=SHAPES, variants=["vendor"], **plan, sampling=Sampling(max_samples=2, min_samples=1)
    )
    return run(plan_, opened, tmp_path, log=lambda line: None)


def test_records_say_which_check_ran(tmp_path):
    auto = _sweep(tmp_path / "auto", [("cpu", CpuBackend())], ops=["mm", "rmm"])
    assert [(r.status, r.check) for r in auto] == [("ok", FULL)] * 4
    chosen = _sweep(tmp_path / "freivalds", [("cpu", CpuBackend())], check=FREIVALDS)
    assert [(r.status, r.check) for r in chosen] == [("ok", FREIVALDS)] * 2
    assert all(0 < r.bound_ratio < 0.5 and r.max_abs_error > 0 for r in chosen), chosen
    with (tmp_path / "freivalds" / "results.csv").open() as file:
        assert [row["check"] for row in csv.DictReader(file)] == [FREIVALDS] * 2
    header = json.loads((tmp_path / "freivalds" / "results.jsonl").read_text().splitlines()[0])
    assert header["plan"]["check"] == FREIVALDS
    assert PointRecord.from_dict(chosen[0].to_dict()) == chosen[0]


def test_a_wrong_kernel_is_a_mismatch_under_freivalds(tmp_path):
    records = _sweep(tmp_path, [("wrong", _DroppingBackend())], check=FREIVALDS, ops=["bmm"])
    assert [(r.status, r.check) for r in records] == [("mismatch", FREIVALDS)] * 2
    assert all(r.equal is False and r.bound_ratio > 1 for r in records)


@pytest.mark.slow
def test_compare_takes_the_check_option(tmp_path):
    out = tmp_path / "run"
    done = xb("compare", "--backends", "cpu", "--variants", "vendor", "--sizes", "24x24",
              "--dtype", "int32,float32", "--check", "freivalds", "--out", str(out),
              "--no-plots")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    points = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()[1:]]
    assert [(p["status"], p["check"]) for p in points] == [("ok", FREIVALDS)] * 2
    refused = xb("compare", "--backends", "cpu", "--check", "sometimes")
    assert refused.returncode == 2 and "invalid choice" in refused.stderr
