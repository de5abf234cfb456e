"""Scripts under scripts/ are run here, small, so they cannot rot."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import xbackend

ROOT = Path(__file__).resolve().parent.parent
# The scripts run `python3`: let that be the interpreter running the tests, whether or
# not its virtual environment is activated.
PATH = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])


def test_gpu_proof_script_runs_small_on_the_cpu(tmp_path):
    env = {
        **os.environ,
        "PATH": PATH,
        "WHEELS": "",
        "BACKENDS": "cpu",
        "SKIP_TESTS": "1",
        "DEFAULT_STEPS": "2",
        "LARGE_REFERENCE": "64x64",
        "LARGE_BASE": "24x24",
        "LARGE_STEPS": "2",
        "LARGE_TILES": "16",
    }
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_proof.sh"), str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "cpu: available" in (tmp_path / "devices.txt").read_text()
    cublas = (tmp_path / "cublas.txt").read_text()
    assert cublas.startswith("skipped: ") or "code equality (64 rows): True" in cublas
    for run in ("default", "large"):
        lines = (tmp_path / run / "results.jsonl").read_text().splitlines()
        points = [json.loads(line) for line in lines[1:]]
        assert points and all(p["status"] == "ok" for p in points)
        assert (tmp_path / run / "runtime_by_backend.png").exists()
    large = [
        json.loads(x)
        for x in (tmp_path / "large" / "results.jsonl").read_text().split("\n")[1:]
        if x
    ]
    assert max(p["M"] for p in large) == 48


def test_sanitize_script_reports_clean_runs_and_uncaught_kernels(tmp_path):
    """With a stand-in sanitizer that catches nothing, the clean runs pass and the
    broken kernels must be flagged as not caught (so the script cannot pass vacuously)."""
    env = {
        **os.environ,
        "PATH": PATH,
        "SANITIZER": str(ROOT / "tests" / "fake_sanitizer.sh"),
        "PROBE_BACKEND": "opencl",
    }
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "sanitize_cuda.sh"), str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    # Every tool runs every case: 134 kernels and tiles, 4 more where CLBlast's vendor line runs.
    counts = {
        tool: re.search(rf"^{tool}: clean, (\d+) cases passed", done.stdout, re.MULTILINE)
        for tool in ("memcheck", "racecheck", "synccheck", "initcheck")
    }
    assert all(counts.values()), done.stdout
    cases = {int(found.group(1)) for found in counts.values() if found}
    assert len(cases) == 1 and min(cases) >= 134, done.stdout
    assert "missing_barrier under racecheck: NOT CAUGHT" in done.stdout
    assert "unguarded_load under memcheck: NOT CAUGHT" in done.stdout


def test_gpu_presets_script_runs_small_on_the_cpu(tmp_path):
    env = {
        **os.environ,
        "PATH": PATH,
        "BACKENDS": "cpu",
        "EXTRA_ARGS": "--sizes 16x16 --variants vendor,naive",
    }
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_presets.sh"), str(tmp_path), "chapter", "blog"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("code equality: ") == 2, done.stdout
    for preset in ("chapter", "blog"):
        assert (tmp_path / preset / "results.jsonl").exists()
    report = (tmp_path / "report.md").read_text()
    assert "Chapter" in report and "Blog" in report


def test_ladder_benchmark_runs_small_anywhere(tmp_path):
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "ladder_benchmark.py"),
         "--backends", "opencl", "--sizes", "33x20x17", "--rmm-sizes", "34x20x18",
         "--repeat", "2"],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": path},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    blocks = done.stdout.split("\n\n")
    mm = next(block for block in blocks if block.startswith("size") and "of cuBLAS" in block)
    rmm = blocks[-1]
    assert "The reduced product (rmm)" in rmm and "of sums+cuBLAS" in rmm, done.stdout
    ladder = ("naive", "tiled", "reg1d", "reg2d", "reg2d_cf", "reg2d_g4", "vec4", "vec4_db")
    with xbackend.get_backend("opencl") as opencl:  # CLBlast's line, where it is installed
        vendor = {"vendor"} & set(opencl.runnable_variants())
    expected = [
        (mm, {*ladder, "warp", "warp_db", *vendor}),
        (rmm, {"tiled", "vec4_db", "warp_db", *vendor}),
    ]
    for table, variants in expected:
        rows = [line.split() for line in table.splitlines() if "·" in line]
        assert {row[3] for row in rows} == variants, table
        assert all(row[5] not in ("WRONG", "—") for row in rows), table  # opencl TFLOP/s
    assert "WRONG" not in done.stdout


def test_ladder_figure_draws_the_saved_h100_run(tmp_path):
    figure = tmp_path / "ladder.png"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "ladder_figure.py"),
         str(ROOT / "docs" / "results" / "h100" / "ladder.txt"), str(figure)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert figure.stat().st_size > 10_000
