"""The sweep: records, failures recorded and survived, budget skips, results files."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from xbackend import results
from xbackend.backends.cpu import CpuBackend, _HostExecution
from xbackend.measuring.timing import Sampling
from xbackend.problems import Shape
from xbackend.sweep.cost import CostModel
from xbackend.sweep.runner import Plan, Target, configs, run

SHAPES = [Shape(8, 7, 8), Shape(16, 14, 16), Shape(24, 21, 24)]


class _WrongBackend(CpuBackend):
    """Drops the last term of every dot product: a classic off-by-one."""

    name = "wrong"

    def _execution(self, op, variant, tile, A, B, params=None):
        return _HostExecution(op, variant, tile, A[:, :-1].copy(), B[:-1, :].copy())


class _FailingBackend(CpuBackend):
    """Fails on the second size, as a driver error would."""

    name = "failing"

    def _execution(self, op, variant, tile, A, B, params=None):
        if A.shape[0] > 8:
            raise RuntimeError("CL_OUT_OF_RESOURCES")
        return super()._execution(op, variant, tile, A, B)


def _run(tmp_path, opened, **plan):
    plan_ = Plan(shapes=SHAPES, **plan, sampling=Sampling(max_samples=2, min_samples=1))
    return run(plan_, opened, tmp_path, log=lambda line: None)


def test_every_point_is_recorded_and_verified(tmp_path):
    records = _run(tmp_path, [("cpu", CpuBackend())], variants=["naive", "vendor"])
    assert [(r.variant, r.M) for r in records] == [
        (v, s.M) for s in SHAPES for v in ("naive", "vendor")
    ]
    assert all(r.status == "ok" and r.equal for r in records)
    assert all(0 <= r.bound_ratio <= 1 and r.gflops > 0 for r in records)
    assert all(r.kernel_s["median"] > 0 and len(r.kernel_samples_s) >= 1 for r in records)


def test_results_files_hold_run_and_points(tmp_path):
    _run(tmp_path, [("cpu", CpuBackend())], variants=["vendor"])
    lines = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert lines[0]["type"] == "run"
    assert lines[0]["devices"]["cpu"]["kind"] == "cpu"
    assert lines[0]["environment"]["packages"]["numpy"] == np.__version__
    assert [x["type"] for x in lines[1:]] == ["point"] * len(SHAPES)
    with (tmp_path / "results.csv").open() as file:
        rows = list(csv.DictReader(file))
    assert [int(row["M"]) for row in rows] == [s.M for s in SHAPES]
    assert all(row["equal"] == "True" and float(row["kernel_median_s"]) > 0 for row in rows)


def test_a_wrong_kernel_is_recorded_as_mismatch(tmp_path):
    records = _run(tmp_path, [("wrong", _WrongBackend())], variants=["vendor"])
    assert [r.status for r in records] == ["mismatch"] * len(SHAPES)
    assert all(r.equal is False and r.bound_ratio > 1 for r in records)


def test_a_failing_point_is_recorded_and_the_sweep_goes_on(tmp_path):
    opened = [("failing", _FailingBackend()), ("cpu", CpuBackend())]
    records = _run(tmp_path, opened, variants=["vendor"])
    failing = [r for r in records if r.label == "failing"]
    assert [r.status for r in failing] == ["ok", "error", "skipped"]
    assert "CL_OUT_OF_RESOURCES" in failing[1].reason
    assert "failed at a smaller size" in failing[2].reason
    assert all(r.status == "ok" for r in records if r.label == "cpu")


def test_budget_skips_points_predicted_too_slow(tmp_path):
    model = CostModel()
    config = configs(Plan(shapes=SHAPES), [("cpu", CpuBackend())])[0]
    model.add(config, 1_000, 0.5)
    model.add(config, 2_000, 1.0)
    assert model.predict(config, 4_000) == pytest.approx(2.0)
    records = _run(tmp_path, [("cpu", CpuBackend())], variants=["naive"], budget_s=1e-9)
    # The first two sizes teach the model; from then on everything is over budget.
    assert records[-1].status == "skipped" and "budget" in records[-1].reason


def test_unrunnable_tile_is_skipped_with_reason(tmp_path):
    records = _run(tmp_path, [("cpu", CpuBackend())], variants=["tiled"], tiles=[0, 8])
    zero = [r for r in records if r.tile == 0]
    assert zero and all(r.status == "skipped" and "positive" in r.reason for r in zero)
    assert all(r.status == "ok" for r in records if r.tile == 8)


def test_load_skips_a_line_cut_short_by_a_crash(tmp_path):
    _run(tmp_path, [("cpu", CpuBackend())], variants=["vendor"])
    path = tmp_path / "results.jsonl"
    path.write_text(path.read_text() + '{"type": "point", "run_')
    runs, points = results.load([tmp_path])
    assert len(runs) == 1 and len(points) == len(SHAPES)


def test_target_parsing():
    assert Target.parse("opencl:pocl") == Target("opencl", "pocl")
    assert Target.parse("CPU").label == "cpu"
    with pytest.raises(ValueError):
        Target.parse(":0")
