"""``xbackend limits``: growth and bisection find the boundary, the budget is predicted
before a size starts, refusals and failures are recorded, never raised."""

from __future__ import annotations

import dataclasses
import re
import time

import numpy as np
import pytest

import xbackend.sweep.limits as limits_module
from xbackend import results
from xbackend.backends.cpu import CpuBackend, _HostExecution
from xbackend.cli import main
from xbackend.errors import DeviceOutOfMemory, UnsupportedParameter
from xbackend.operations import Shape, operation
from xbackend.problems import dtype_named
from xbackend.sweep.limits import find_limit, limits, limits_table, line_config

LIMIT = 100  # the fake memory limit: N×N products above it do not fit
STEP = 4


def _refuse_above(limit):
    def memory_problem(config, shape, batch, asked="auto"):
        return f"fake: {shape.M} is over {limit}" if limit < shape.M else None

    return memory_problem


class _Watched(CpuBackend):
    """Records every operand it is handed, and can fail, refuse or sleep by size."""

    name = "watched"

    def __init__(self, device=None, *, refuse_above=None, fail_above=None, sleep_at_32_s=0.0):
        super().__init__(device)
        self.sizes: list[int] = []
        self.operands: list[tuple[np.ndarray, np.ndarray]] = []
        self.refuse_above, self.fail_above = refuse_above, fail_above
        self.sleep_at_32_s = sleep_at_32_s

    def _execution(self, op, variant, tile, A, B, params=None):
        n = A.shape[0]
        self.sizes.append(n)
        self.operands.append((A, B))
        if self.refuse_above and n > self.refuse_above:
            raise UnsupportedParameter(f"A has {n * n} elements; fake 32-bit index limit")
        if self.fail_above and n > self.fail_above:
            raise RuntimeError("CL_OUT_OF_RESOURCES")
        if self.sleep_at_32_s:
            return _Slow(op, variant, tile, A, B, pause_s=self.sleep_at_32_s * (n / 32) ** 3)
        return _HostExecution(op, variant, tile, A, B)


class _Slow(_HostExecution):
    """A product that takes as long as a slow device's would (``pause_s`` a run)."""

    def __init__(self, op, variant, tile, A, B, *, pause_s: float):
        super().__init__(op, variant, tile, A, B)
        self.pause_s: float = pause_s

    def run(self) -> float:
        time.sleep(self.pause_s)
        kernel_s: float = super().run()
        return kernel_s + self.pause_s


class _Wrong(CpuBackend):
    """Drops the last term of every dot product above 32."""

    name = "wrong"

    def _execution(self, op, variant, tile, A, B, params=None):
        if A.shape[0] > 32:
            A, B = A[:, :-1].copy(), B[:-1, :].copy()
        return _HostExecution(op, variant, tile, A, B)


def _find(backend, records, *, op="mm", dtype="float32", start=16, budget_s=60.0):
    config = line_config("cpu", backend, op, dtype, "vendor")
    return find_limit(
        config, start=start, budget_s=budget_s, record=records.append, min_step=STEP, seed=3
    )


def _assert_boundary(limit, bound):
    assert limit.largest is not None and limit.first_failed is not None
    low, high = limit.largest.M, limit.first_failed.M
    assert low <= bound < high
    assert high - low <= max(STEP, low // 16)
    sizes = [p.M for p in limit.records]
    grown = next((i for i in range(1, len(sizes)) if sizes[i] < sizes[i - 1]), len(sizes))
    assert len(sizes) - grown <= limits_module.MAX_BISECTIONS


def test_growth_and_bisection_find_a_memory_limit_to_the_step(monkeypatch):
    monkeypatch.setattr(limits_module, "memory_problem", _refuse_above(LIMIT))
    records: list[results.PointRecord] = []
    backend = _Watched()
    with backend:
        limit = _find(backend, records)
        _assert_boundary(limit, LIMIT)
        assert [p.M for p in records[:4]] == [16, 32, 64, 128]  # doubling first
        assert all(n <= LIMIT for n in backend.sizes)  # a misfit is never started
        # Seeded operands from compare's maker: the same for the same seed, never zeros.
        A, B = backend.operands[-1]
        n = A.shape[0]
        made = operation("mm").operands(Shape(n, n, n), 3, dtype_named("float32"), 1)
        assert np.array_equal(A, made[0]) and np.array_equal(B, made[1]) and A.any()
    assert records == list(limit.records)
    refused = [p for p in records if p.M > LIMIT]
    assert refused and all(p.status == "skipped" and "fake" in p.reason for p in refused)
    assert all(p.status == "ok" and p.equal for p in records if p.M <= LIMIT)


def test_the_device_memory_bounds_growth_on_the_opencl_cpu_device(monkeypatch):
    opencl = pytest.importorskip("xbackend.backends.opencl")
    available, why = opencl.OpenCLBackend.available()
    if not available:
        pytest.skip(why)
    with opencl.OpenCLBackend() as backend:
        fake = dataclasses.replace(backend.device, global_mem_bytes=3 * LIMIT * LIMIT * 4)
        monkeypatch.setattr(backend, "_device", fake)
        records: list[results.PointRecord] = []
        config = line_config("opencl", backend, "mm", "float32", "tiled")
        limit = find_limit(config, start=16, budget_s=60.0, record=records.append, min_step=STEP)
    _assert_boundary(limit, LIMIT)
    assert "the device has" in limit.why
    assert limit.device_mem_bytes == 3 * LIMIT * LIMIT * 4


def test_the_budget_stops_growth_before_a_slow_size_starts():
    records: list[results.PointRecord] = []
    backend = _Watched(sleep_at_32_s=0.02)
    with backend:
        limit = _find(backend, records, start=32, budget_s=0.1)
        assert 64 not in backend.sizes  # predicted at 8 × 0.02 s: never started
    first_64 = next(p for p in records if p.M == 64)
    assert first_64.status == "skipped" and first_64.reason.startswith("predicted")
    assert limit.largest is not None and limit.largest.M >= 32
    assert (limit.largest.end_to_end_s or {})["median"] <= 0.1
    assert limit.first_failed is not None and limit.first_failed.M <= 64


def test_a_refused_size_is_skipped_with_the_backends_message():
    records: list[results.PointRecord] = []
    backend = _Watched(refuse_above=40)
    with backend:
        limit = _find(backend, records)
    _assert_boundary(limit, 40)
    refused = [p for p in records if p.M > 40]
    assert all(p.status == "skipped" and "32-bit index" in p.reason for p in refused)
    assert "32-bit index" in limit.why and "(at " not in limit.why


def test_an_out_of_memory_error_is_a_limit_too():
    class _Small(CpuBackend):
        name = "small"

        def _execution(self, op, variant, tile, A, B, params=None):
            if A.shape[0] > 50:
                raise DeviceOutOfMemory(f"out of memory: {A.shape[0]}")
            return _HostExecution(op, variant, tile, A, B)

    records: list[results.PointRecord] = []
    with _Small() as backend:
        limit = _find(backend, records)
    _assert_boundary(limit, 50)
    assert limit.why.startswith("out of memory")


def test_a_failure_or_a_wrong_result_ends_the_line_and_is_recorded():
    records: list[results.PointRecord] = []
    backend = _Watched(fail_above=20)
    with backend:
        limit = _find(backend, records)
    assert [p.status for p in records] == ["ok", "error"]
    assert "CL_OUT_OF_RESOURCES" in records[-1].reason and limit.why.startswith("error")
    records = []
    with _Wrong() as wrong:
        limit = _find(wrong, records)
    assert [p.status for p in records] == ["ok", "ok", "mismatch"]
    assert limit.largest is not None and limit.largest.M == 32
    assert limit.why.startswith("mismatch")


def test_a_variant_that_cannot_run_is_one_skipped_point():
    records: list[results.PointRecord] = []
    with CpuBackend() as backend:
        config = line_config("cpu", backend, "mm", "float32", "no-such-variant")
        limit = find_limit(config, start=16, budget_s=1.0, record=records.append)
    assert len(records) == 1 and records[0].status == "skipped"
    assert limit.largest is None and "no variant" in limit.why


def test_the_run_is_recorded_and_tabled_per_backend_op_and_dtype(tmp_path, monkeypatch):
    monkeypatch.setattr(limits_module, "memory_problem", _refuse_above(48))
    opened = [("cpu", CpuBackend()), ("watched", _Watched())]
    try:
        found = limits(
            opened, tmp_path, ops=["mm", "rmm"], dtypes=["float32", "int32"], start=16,
            budget_s=5.0, min_step=8, log=lambda line: None,
        )  # fmt: skip
    finally:
        for _, backend in opened:
            backend.close()
    assert len(found) == 2 * 2 * 2
    loaded = results.load([tmp_path])
    assert len(loaded.runs) == 1
    host = next(iter(loaded.runs.values())).host  # a point read knows its run's host
    recorded = [dataclasses.replace(p, host=host) for limit in found for p in limit.records]
    assert loaded.points == recorded
    assert all(isinstance(p, results.PointRecord) for p in loaded.points)
    table = limits_table(found).splitlines()
    assert len(table) == 2 + len(found)
    for limit, row in zip(found, table[2:], strict=True):
        config = limit.config
        assert (
            row.startswith(config.label)
            and f" {config.op} " in row
            and config.dtype in row
            and config.label in row
        )
        assert limit.largest is not None and limit.largest.M <= 48


def test_the_command_prints_the_table_and_writes_results(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(limits_module, "memory_problem", _refuse_above(40))
    out = tmp_path / "limits"
    code = main(["limits", "--backends", "cpu", "--start", "16", "--budget", "5",
                 "--dtype", "float32,float64", "--out", str(out)])  # fmt: skip
    printed = capsys.readouterr().out
    assert code == 0
    assert "largest that ran" in printed and "float64" in printed and "fake" in printed
    assert results.load([out]).points
    assert main(["limits", "--backends", "cpu", "--out", str(out)]) == 2  # holds results


def test_the_selection_options_choose_the_lines(tmp_path, monkeypatch, capsys):
    """--variants and --tile mean what they mean to compare: a line per variant and tile."""
    monkeypatch.setattr(limits_module, "memory_problem", _refuse_above(40))
    out = tmp_path / "limits"
    code = main(["limits", "--backends", "cpu", "--variants", "naive,tiled", "--tile", "8,16",
                 "--start", "16", "--budget", "5", "--out", str(out)])  # fmt: skip
    assert code == 0
    lines = {(p.variant, p.tile) for p in results.load([out]).points}
    assert lines == {("naive", None), ("tiled", 8), ("tiled", 16)}
    printed = capsys.readouterr().out.splitlines()
    rows = [re.split(r"\s{2,}", row) for row in printed if row.startswith("cpu  ")]
    assert sorted((row[3], row[4]) for row in rows) == [("naive", "—"), ("tiled", "16"),
                                                        ("tiled", "8")]  # fmt: skip
