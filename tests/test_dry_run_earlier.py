"""compare --dry-run predicts from the earlier runs it finds beside --out (issue 53): it said
"predicted time: unknown" beside a folder of them."""

from __future__ import annotations

import datetime
import re

from xbackend.cli import main
from xbackend.results import PointRecord
from xbackend.sweep import earlier


def _at(second: int, run: str = "r", M: int = 8) -> PointRecord:
    return PointRecord(
        run_id=run, backend="cpu", label="cpu", device="CPU", variant="naive", tile=None,
        dtype="float32", M=M, K=M, N=M, flops=2 * M**3, status="skipped",
        timestamp=f"2026-11-28T08:00:{second:02d}+00:00",
    )  # fmt: skip


def test_a_points_time_runs_to_the_next_start_and_the_last_to_the_files_last_write():
    points = [_at(1, M=8), _at(4, M=16), _at(9, M=24)]
    end = points[2].timestamp.replace(":09+", ":12+")
    last_write = datetime.datetime.fromisoformat(end).timestamp()
    found = earlier.point_seconds(points, last_write)
    assert [found[p.key] for p in points] == [3.0, 5.0, 3.0]


def test_the_last_point_before_a_resume_has_no_time():
    points = [_at(1, M=8), _at(50, run="resumed", M=16)]
    found = earlier.point_seconds(points, last_write=0.0)
    assert points[0].key not in found and points[1].key not in found


def test_a_dry_run_beside_an_earlier_run_predicts_from_it(tmp_path, capsys):
    options = ["--backends", "cpu", "--variants", "naive,vendor", "--sizes", "8x8,16x16",
               "--samples", "3", "--no-plots"]  # fmt: skip
    assert main(["compare", *options, "--out", str(tmp_path / "first")]) == 0
    capsys.readouterr()
    assert main(["compare", *options, "--sizes", "8x8,16x16,24x24", "--dry-run",
                 "--out", str(tmp_path / "next")]) == 0  # fmt: skip
    said = capsys.readouterr().out
    assert re.search(
        r"\npredicted time: (under 1 s|[\d.]+ s) for the points \(start-up, figures and "
        r"report on top\), from 4 points as long as they took in 1 earlier run beside --out, "
        r"2 points measured in none of them \(not counted\); the host's load average then "
        r"[\d.]+: a busier host takes longer\n",
        said,
    ), said
    assert "cpu mm naive float32: 3 sizes; time unknown until measured" in said
    assert main(["compare", *options, "--dry-run", "--out", str(tmp_path / "again")]) == 0
    said = capsys.readouterr().out
    assert re.search(
        r"cpu mm naive float32: 2 sizes; (under 1 s|[\d.]+ s) in the earlier runs", said
    ), said
