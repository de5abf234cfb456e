"""The typed records across the results seam: they round-trip, and know older files."""

from __future__ import annotations

import math

import pytest

from xbackend.operations import Shape
from xbackend.results import LineKey, PointRecord, RecordError, RunHeader
from xbackend.results.plan import Plan

STATS = {"n": 2, "median": 1e-3, "q1": 1e-3, "q3": 1e-3, "min": 1e-3, "max": 1e-3, "mean": 1e-3}


def _record(**fields: object) -> PointRecord:
    base: dict[str, object] = dict(
        run_id="r", backend="cpu", label="cpu", device="CPU", variant="tiled", tile=16,
        dtype="float32", M=8, K=4, N=8, flops=2 * 8 * 4 * 8 * 3, status="ok", op="bmm",
        batch=3, equal=True, max_abs_error=0.0, bound_ratio=0.1, check="freivalds", kernel_s=STATS,
        end_to_end_s=STATS, kernel_samples_s=[1e-3, 1e-3], gflops=1.5, step=2,
        params={"BM": 64},
    )  # fmt: skip
    return PointRecord(**{**base, **fields})  # type: ignore[arg-type]


def test_a_point_round_trips():
    record = _record()
    assert PointRecord.from_dict(record.to_dict()) == record


def test_keys_of_a_point_and_its_line():
    record = _record()
    assert record.line_key == LineKey("cpu", "CPU", "bmm", "tiled", 16, "float32")
    assert record.key == (*record.line_key, 3, 8, 4, 8)
    assert record.batched and _record(op="mm", batch=1).batched is False
    assert _record(op="xyz").operation is None  # an operation of another version


def test_older_points_get_their_defaults():
    old = _record().to_dict()
    for field in ("op", "batch", "dtype", "tile", "reason", "gflops", "step", "run_id", "check"):
        del old[field]
    point = PointRecord.from_dict(old)
    found = (point.op, point.batch, point.dtype, point.tile, point.step, point.check)
    assert found == ("mm", 1, "float32", None, None, "")
    assert point.gflops == pytest.approx(old["flops"] / 1e-3 / 1e9)  # from the median
    assert point.gflops is not None
    assert not math.isnan(point.gflops)


def test_a_bad_field_is_named():
    with pytest.raises(RecordError, match="'step'"):
        PointRecord.from_dict({**_record().to_dict(), "step": 0})
    with pytest.raises(RecordError, match="'kernel_s'"):
        PointRecord.from_dict({**_record().to_dict(), "kernel_s": None})
    with pytest.raises(RecordError, match="'check'"):
        PointRecord.from_dict({**_record().to_dict(), "check": 1})


def test_a_run_header_round_trips_and_reads_older_plans():
    plan = Plan(shapes=[Shape(8, 4, 8)], ops=["mm", "rmm"], batch=4, preset="lab", seed=3)
    header = RunHeader("r", "2026-01-01T00:00:00+00:00", {"host": "h"}, plan, {"cpu": {}})
    assert RunHeader.from_dict(header.to_dict()) == header
    assert header.host == "h"
    legacy = RunHeader.from_dict({"run_id": "old", "plan": {"op": "rmm"}, "devices": {"x": "GPU"}})
    assert legacy.plan.ops == ["rmm"] and legacy.devices == {"x": {"name": "GPU"}}
    assert RunHeader.from_dict({"run_id": "older"}).plan.ops == ["mm"]
    with pytest.raises(RecordError, match="'plan'"):
        RunHeader.from_dict({"run_id": "r", "plan": []})


def test_the_interval_share_is_read_from_the_recorded_interval():
    """ci_low and ci_high keep their names: a new file's order statistics and an older
    file's bootstrap interval both read, as ± a share of the median."""
    stats = {**STATS, "n": 10, "median": 2e-3, "ci_low": 1.9e-3, "ci_high": 2.2e-3}
    point = PointRecord.from_dict(_record(kernel_s=stats).to_dict())
    assert point.kernel_s == stats
    assert point.kernel_interval_share == pytest.approx(0.3e-3 / 2 / 2e-3)
    assert _record().kernel_interval_share is None  # a file that recorded no interval
    single = {**stats, "n": 1, "ci_low": 2e-3, "ci_high": 2e-3}
    assert _record(kernel_s=single).kernel_interval_share is None  # one sample: no interval
    assert _record(status="skipped", kernel_s=None).kernel_interval_share is None
