"""Presets for the documents' experiments, and the report command, end to end on the CPU."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import xbackend_here

from xbackend.backends.cpu import CpuBackend
from xbackend.measuring.timing import Sampling
from xbackend.problems import Shape
from xbackend.sweep.runner import PILOT_ABOVE_FLOPS, Plan, run
from xbackend.sweep.sizes import PRESETS

ROOT = Path(__file__).resolve().parent.parent


def xb(*args: str) -> subprocess.CompletedProcess[str]:
    """The command in this process: what it says and writes is what these tests read."""
    return xbackend_here(*args)


def test_presets_follow_the_documents():
    assignment = PRESETS["assignment"].shapes(gpu=True)
    assert assignment[0] == Shape(16, 14, 16) and assignment[-1] == Shape(608, 532, 608)
    lab = PRESETS["lab"].shapes(gpu=True)
    assert [s.M for s in lab] == [2**e for e in range(4, 16)]
    assert max(s.M for s in PRESETS["lab"].shapes(gpu=False)) == 1024
    chapter = PRESETS["chapter"]
    assert chapter.ops == ("rmm",) and chapter.tiles == (8, 16, 32)
    assert [s.M for s in chapter.shapes(gpu=True)] == [128, 512, 2048, 8192, 16384, 32768]
    assert all(s.M % 2 == 0 and s.N % 2 == 0 for s in chapter.shapes(gpu=False))
    blog = PRESETS["blog"]
    assert blog.ops == ("mm", "bmm") and blog.dtypes == ("int32", "float32", "float64")
    assert blog.shapes(gpu=True) == [Shape(1024, 1024, 1024)]


@pytest.mark.slow
def test_chapter_preset_runs_and_reports(tmp_path):
    out = tmp_path / "chapter"
    done = xb("compare", "--preset", "chapter", "--backends", "cpu,opencl",
              "--sizes", "16x16,64x64", "--tile", "8,16", "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    points = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()[1:]]
    assert {p["op"] for p in points} == {"rmm"}
    # the chapter's kernels, and CLBlast's line where the OpenCL backend has one for rmm
    opencl = {p["variant"] for p in points if p["backend"] == "opencl"}
    assert opencl - {"vendor"} == {"naive4", "naive", "tiled"}
    # every point measured and equal; CLBlast's line is skipped, with its reason, where
    # pyclblast is not installed
    for p in points:
        clblast_missing = p["variant"] == "vendor" and "pyclblast" in p.get("reason", "")
        assert p["status"] == "ok" or (p["status"] == "skipped" and clblast_missing), p
    html = (out / "report.html").read_text()
    assert "Chapter" in html and "data:image/png;base64," in html
    assert (out / "report.md").exists()


@pytest.mark.slow
def test_report_command_on_a_results_folder(tmp_path):
    out = tmp_path / "run"
    assert xb("compare", "--backends", "cpu", "--op", "mm,bmm", "--batch", "2",
              "--dtype", "int32,float64", "--variants", "vendor", "--sizes", "24x24",
              "--out", str(out), "--no-plots").returncode == 0  # fmt: skip
    assert not (out / "report.html").exists()
    done = xb("report", str(out), "--out", str(tmp_path / "report"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "report" / "report.html").exists()
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "int32" in markdown and "float64" in markdown and "bmm" in markdown


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, message",
    [
        (["--op", "rmm", "--sizes", "15x14"], "rmm needs even M and N"),
        (["--dtype", "float16"], "unknown dtype float16"),
        (["--op", "gemv"], "unknown operation gemv"),
        (["--preset", "paper"], "invalid choice"),
    ],
)
def test_bad_experiment_options_are_usage_errors(args, message):
    done = xb("compare", "--backends", "cpu", *args)
    assert done.returncode == 2 and message in done.stderr


@pytest.mark.slow
def test_a_pilot_run_keeps_a_first_huge_point_within_budget(tmp_path):
    """The serial loop at 1024³ would take minutes; its first point is predicted and skipped."""
    big = Shape(1024, 1024, 1024)
    assert big.flops > PILOT_ABOVE_FLOPS
    plan = Plan(
        shapes=[big],
        variants=["naive"],
        budget_s=5.0,
        sampling=Sampling(max_samples=1, min_samples=1),
    )
    [record] = run(plan, [("cpu", CpuBackend())], tmp_path, log=lambda line: None)
    assert record.status == "skipped" and "budget" in record.reason
