"""Scripts under scripts/ are run here, small, so they cannot rot."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import xbackend
from xbackend.backends.registry import backend_class
from xbackend.pytest_plugin import needs_backend
from xbackend.results import load as load_results

ROOT = Path(__file__).resolve().parent.parent
# The scripts run `python3`: let that be the interpreter running the tests, whether or
# not its virtual environment is activated.
PATH = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])


@pytest.mark.slow
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


@pytest.mark.slow
def test_sanitize_script_reports_clean_runs_and_uncaught_kernels(tmp_path):
    """With a stand-in sanitizer that catches nothing, the clean runs pass and the
    broken kernels must be flagged as not caught (so the script cannot pass vacuously)."""
    needs_backend("opencl")  # the script runs the OpenCL kernels
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_ladder_benchmark_runs_small_anywhere(tmp_path):
    needs_backend("opencl")  # the script runs the OpenCL kernels
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "ladder_benchmark.py"),
         "--backends", "opencl", "--sizes", "33x20x17", "--rmm-sizes", "34x20x18",
         "--repeat", "2", "--rounds", "3"],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": path},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PyTorch's matmul is not timed" in done.stdout
    blocks = done.stdout.split("\n\n")
    mm = next(block for block in blocks if block.startswith("size") and "of cuBLAS" in block)
    rmm = blocks[-1]
    assert "The reduced product (rmm)" in rmm and "of sums+cuBLAS" in rmm, done.stdout
    ladder = ("naive", "tiled", "reg1d", "reg2d", "reg2d_cf", "reg2d_g4", "vec4", "vec4_db")
    with xbackend.get_backend("opencl") as opencl:  # CLBlast's line, where it is installed
        vendor = {"vendor"} & set(opencl.runnable_variants())
    expected = [
        (mm, {*ladder, "warp", "warp_db", "warp_async", *vendor}),
        (rmm, {"tiled", "vec4_db", "warp_db", *vendor}),
    ]
    for table, variants in expected:
        rows = [line.split() for line in table.splitlines() if "·" in line]
        assert {row[3] for row in rows} == variants, table
        assert all(row[5] not in ("WRONG", "—") for row in rows), table  # opencl TFLOP/s
        assert all(row[6] == "—" for row in rows), table  # no cuBLAS here
        if vendor:  # each rung's share of CLBlast, with its interval: 57.9% [57.1–60.7]
            for row in rows:
                share = " ".join(row[7:])
                if row[3] == "vendor":
                    assert share == "100%", table
                    continue
                found = re.fullmatch(r"([\d.]+)% \[([\d.]+)–([\d.]+)\]", share)
                assert found, table
                value, low, high = map(float, found.groups())
                assert 0 < low <= value <= high, table
    if vendor:  # 3 rounds of 2 samples beside each rung
        assert re.search(r"opencl CLBlast .* median of its \d+ samples beside \d+ rungs",
                         done.stdout)  # fmt: skip
    assert "WRONG" not in done.stdout


def _ladder_module():
    spec = importlib.util.spec_from_file_location(
        "ladder_benchmark", ROOT / "scripts" / "ladder_benchmark.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while made
    spec.loader.exec_module(module)
    return module


def test_the_ladder_share_interval_is_the_ratio_of_medians_bootstrapped():
    ladder = _ladder_module()
    rng = np.random.default_rng(31)
    rung = list(2e-3 * rng.lognormal(0.0, 0.03, 40))  # half the vendor's speed
    vendor = list(1e-3 * rng.lognormal(0.0, 0.03, 40))
    share, low, high = ladder.share_interval(rung, vendor)
    assert share == pytest.approx(float(np.median(vendor) / np.median(rung)))
    assert low < 0.5 < high and high - low < 0.05
    assert ladder.share_interval(rung, vendor) == (share, low, high)  # seeded
    # Fewer, noisier samples: a wider interval.
    _, wide_low, wide_high = ladder.share_interval(rung[:6], vendor[:6])
    assert wide_high - wide_low > high - low


class _Recorder:
    """A stand-in backend that computes with NumPy and records the order of its turns."""

    name = "made-up"

    def __init__(self, turns: list[str]):
        self.turns = turns

    def measure(self, A, B, variant, tile, *, op, warmup, samples, min_samples):
        assert op == "mm" and samples == min_samples == 3 and warmup >= 0
        self.turns.append(variant)
        C = A @ B
        times = [1e-3] * samples
        return SimpleNamespace(
            kernel_s=times, kept=(times, times), result=C, last_result=C, params=None, tile=tile
        )


def test_the_ladder_times_each_rung_interleaved_with_its_vendor_lines():
    ladder = _ladder_module()
    turns: list[str] = []
    backend = _Recorder(turns)
    rng = np.random.default_rng(5)
    A, B = rng.standard_normal((9, 7), np.float32), rng.standard_normal((7, 5), np.float32)
    rung = ladder.Line("x", backend, "tiled", 16)
    vendors = [ladder.Line("cuda", backend, "cublas"), ladder.Line("x", backend, "vendor")]
    timed, beside = ladder.interleaved(rung, vendors, A, B, "mm", 4, 3)
    assert turns == ["cublas", "vendor", "tiled"] * 4
    assert timed.equal and len(timed.samples_s) == 12
    assert [len(vendor.samples_s) for vendor in beside] == [12, 12]


@pytest.mark.slow
def test_index_cost_runs_small_anywhere():
    """Every mm variant but the vendor's, in the default and the wide build side by side."""
    needs_backend("opencl")  # the script runs the OpenCL kernels
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "index_cost.py"), "--backend", "opencl",
         "--sizes", "33x20x17", "--repeat", "2", "--rounds", "2"],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": path},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    table = done.stdout.split("\n\n")[-1]
    assert table.startswith("size") and "wide/default [95%]" in table, done.stdout
    rows = [line.split() for line in table.splitlines() if "·" in line]
    ladder = {"naive", "tiled", "reg1d", "reg2d", "reg2d_cf", "reg2d_g4", "vec4", "vec4_db"}
    assert {row[4] for row in rows} == {*ladder, "warp", "warp_db", "warp_async"}, table
    for row in rows:  # 33×20 · 20×17  mm  VARIANT  TILE  32/64  MS  MS  COST [LOW–HIGH]
        assert row[3] == "mm" and row[6] == "32/64", table
        found = re.fullmatch(r"([\d.]+) \[([\d.]+)–([\d.]+)\]", " ".join(row[9:]))
        assert found, table
        cost, low, high = map(float, found.groups())
        assert 0 < low <= cost <= high, table
    assert "WRONG" not in done.stdout


class _Builds:
    """A stand-in backend that computes with NumPy and records the build of each turn."""

    name = "made-up"

    def __init__(self):
        self.mode: str | None = None
        self.turns: list[str | None] = []

    def use_index(self, mode):
        self.mode = mode

    def index_bits(self, A, B, variant, op):
        return 64 if self.mode == "wide" else 32

    def measure(self, A, B, variant, *, op, warmup, samples, min_samples):
        self.turns.append(self.mode)
        C = A @ B
        times = [2e-3 if self.mode == "wide" else 1e-3] * samples
        return SimpleNamespace(kept=(times, times), result=C, last_result=C, tile=16)


def test_index_cost_times_the_two_builds_in_turns():
    spec = importlib.util.spec_from_file_location("index_cost", ROOT / "scripts" / "index_cost.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    backend = _Builds()
    rng = np.random.default_rng(5)
    A, B = rng.standard_normal((9, 7), np.float32), rng.standard_normal((7, 5), np.float32)
    timed = module.interleaved(backend, A, B, "tiled", "mm", 3, 2)
    assert backend.turns == ["auto", "wide"] * 3 and backend.mode is None  # handed back
    assert (timed["default"].bits, timed["wide"].bits) == (32, 64)
    assert [len(t.samples_s) for t in timed.values()] == [6, 6]
    assert module.cost_text(timed["default"].samples_s, timed["wide"].samples_s).startswith(
        "2.000 [2.000–2.000]"
    )


@pytest.mark.slow
def test_ladder_figure_draws_the_saved_h100_run(tmp_path):
    figure = tmp_path / "ladder.png"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "ladder_figure.py"),
         str(ROOT / "docs" / "results" / "h100" / "ladder.txt"), str(figure)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert figure.stat().st_size > 10_000


def _timing_accuracy_module():
    spec = importlib.util.spec_from_file_location(
        "timing_accuracy", ROOT / "scripts" / "timing_accuracy.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_timing_accuracy_reads_ncu_and_leaves_the_hold_out():
    accuracy = _timing_accuracy_module()
    head = '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n'
    rows = [("hold", "msecond", "17.2"), ("mm_tiled", "usecond", "280.5"),
            ("hold", "msecond", "17.1"), ("mm_tiled", "usecond", "1,279.5"),
            ("mm_tiled", "nsecond", "279900")]  # fmt: skip
    text = (
        "==PROF== noise before the table\n"
        + head
        + "".join(
            f'"{i}","{name}","gpu__time_duration.sum","{unit}","{value}"\n'
            for i, (name, unit, value) in enumerate(rows)
        )
    )
    durations = accuracy.kernel_durations(text)
    assert durations == pytest.approx([280.5e-6, 1279.5e-6, 279.9e-6])
    assert accuracy.per_run_s(durations, 3) == pytest.approx(280.5e-6)
    # Two kernels a run (a split product): each run's sum, then the median of the sums.
    pairs = [100e-6, 10e-6, 101e-6, 11e-6, 150e-6, 12e-6]
    assert accuracy.per_run_s(pairs, 3) == pytest.approx(112e-6)
    with pytest.raises(ValueError, match="do not split"):
        accuracy.per_run_s(durations, 2)


@pytest.mark.slow
def test_timing_accuracy_says_what_it_needs_in_one_line():
    if backend_class("cuda").available()[0] and shutil.which("ncu"):
        pytest.skip("CUDA and ncu are here: the script would run")
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "timing_accuracy.py")],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": path},
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith("timing_accuracy: needs ") and done.stderr.count("\n") == 1


def test_tune_agreement_compares_two_caches_entry_by_entry(tmp_path):
    """The same choice is 'yes'; another one is 'no', with whether the races' intervals
    overlap; an entry only one cache holds is said."""

    def entry(params: dict[str, int], low: float, high: float) -> dict[str, object]:
        return {"params": params, "interval_s": [low, high]}

    serial = {"a": entry({"BM": 128}, 1e-3, 2e-3), "b": entry({"BM": 64}, 1e-3, 2e-3),
              "c": entry({"BM": 64}, 1e-3, 2e-3), "d": entry({"BM": 64}, 1e-3, 2e-3)}  # fmt: skip
    shared = {"a": entry({"BM": 128}, 1e-3, 2e-3), "b": entry({"BM": 32}, 1.5e-3, 3e-3),
              "c": entry({"BM": 32}, 3e-3, 4e-3)}  # fmt: skip
    paths = []
    for name, entries in (("serial", serial), ("shared", shared)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"format": 3, "entries": entries}))
        paths.append(str(path))
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "tune_agreement.py"), *paths],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = {line.split(" | ")[0].strip("| "): line for line in done.stdout.splitlines()}
    assert rows["a"].endswith("| yes |")
    assert rows["b"].endswith("| no, their intervals overlap |")
    assert rows["c"].endswith("| no |")
    assert rows["d"].endswith("| only one |")
    assert "1 of 3 entries chose the same configuration" in done.stdout


def test_cluster_timeline_reads_a_run_s_records(compare_run):
    """One row a run: its points, serial, and a median end-to-end time per backend."""
    assert compare_run.returncode == 0, compare_run.stderr
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "cluster_timeline.py"), str(compare_run.out)],
        capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": path},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (row,) = [line for line in done.stdout.splitlines() if str(compare_run.out) in line]
    points = len([p for p in load_results([compare_run.out]).points if p.timestamp])
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[1] == str(points) and cells[2] == "serial"
    assert re.fullmatch(r"(\w+ \d+\.\d\d ms(, )?)+", cells[5]), cells[5]
