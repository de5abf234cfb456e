"""Nothing lost: Ctrl-C and kill leave valid results, and --resume finishes the job."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from xbackend import results
from xbackend.results import PointRecord, ResultsWriter

ROOT = Path(__file__).resolve().parent.parent
# The serial CPU loop: slow enough to interrupt mid-sweep, quick enough to finish.
SWEEP = ["--backends", "cpu", "--variants", "naive", "--base", "24x21", "--steps", "12"]


def _start(out: Path, *extra: str) -> subprocess.Popen[str]:
    path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path), "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "xbackend", "compare", *SWEEP, "--out", str(out), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _interrupt_after(process: subprocess.Popen[str], points: int, sig: int) -> list[str]:
    assert process.stdout is not None
    seen = []
    for line in process.stdout:
        if "code equality" in line:
            seen.append(line)
            if len(seen) == points:
                process.send_signal(sig)
                break
    process.wait(timeout=120)
    return seen


def _valid_points(out: Path) -> list[dict[str, Any]]:
    lines = (out / "results.jsonl").read_text().splitlines()
    parsed = [json.loads(line) for line in lines]  # every line whole
    with (out / "results.csv").open() as file:
        rows = list(csv.DictReader(file))
    points = [p for p in parsed if p["type"] == "point"]
    assert len(rows) == len(points)
    return points


@pytest.mark.slow
def test_ctrl_c_keeps_finished_points_and_resume_finishes(tmp_path):
    out = tmp_path / "run"
    process = _start(out)
    seen = _interrupt_after(process, 3, signal.SIGINT)
    assert process.returncode == 130
    assert process.stderr is not None
    assert "--resume" in process.stderr.read()
    kept = _valid_points(out)
    assert len(seen) >= 3 and len(kept) >= len(seen)

    done = subprocess.run(
        [sys.executable, "-m", "xbackend", "compare", *SWEEP, "--out", str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 2 and "--resume" in done.stderr  # no silent mixing

    resumed = _start(out, "--resume")
    stdout, _ = resumed.communicate(timeout=600)
    assert resumed.returncode == 0
    points = _valid_points(out)
    keys = [results.PointRecord.from_dict(p).key for p in points]
    assert len(keys) == len(set(keys)) == 12  # every size once, none measured twice
    assert stdout.count("code equality: True") == 12 - len(kept)
    assert "code equality: 12/12" in stdout


@pytest.mark.slow
def test_kill_leaves_valid_files(tmp_path):
    out = tmp_path / "run"
    process = _start(out)
    _interrupt_after(process, 2, signal.SIGKILL)
    assert process.returncode == -signal.SIGKILL
    points = [p for p in map(json.loads, (out / "results.jsonl").read_text().splitlines())]
    assert len([p for p in points if p["type"] == "point"]) >= 2
    # The CSV may miss the row of a point killed between the two writes, until the
    # folder is next opened: then it is derived again from results.jsonl.
    ResultsWriter(out).close()
    assert len(_valid_points(out)) >= 2


def _record(M: int) -> PointRecord:
    return PointRecord(
        run_id="r",
        backend="cpu",
        label="cpu",
        device="d",
        variant="vendor",
        tile=None,
        dtype="float32",
        M=M,
        K=M,
        N=M,
        flops=2 * M**3,
        status="skipped",
    )


def test_a_line_cut_short_is_dropped_before_appending(tmp_path):
    with ResultsWriter(tmp_path) as writer:
        writer.append(_record(1))
    for name in ("results.jsonl", "results.csv"):
        with (tmp_path / name).open("a") as file:
            file.write('{"type": "point", "M": 99')  # what a crash mid-write could leave
    with ResultsWriter(tmp_path) as writer:
        writer.append(_record(2))
    _, points = results.load([tmp_path])
    assert [p.M for p in points] == [1, 2]
    with (tmp_path / "results.csv").open() as file:
        assert [row["M"] for row in csv.DictReader(file)] == ["1", "2"]
