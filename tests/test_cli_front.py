"""The command line's front: the defaults that answer the assignment, the ladder one word
away, --version, --dry-run, --quiet, tune's option names, devices' alignment (the compare
runs that tests only read are shared: ``compare_run`` and ``vendor_run`` in conftest.py)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import xbackend_here

import xbackend
from xbackend.backends.cpu import CpuBackend
from xbackend.sweep.configs import resolve_variants
from xbackend.sweep.sizes import PRESETS

ROOT = Path(__file__).resolve().parent.parent
NOT_LADDER = {"naive", "tiled", "vendor", "naive4"}


def xb(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The command in this process: these tests read what it says and writes (the shared
    runs of conftest.py are ``python -m xbackend`` itself)."""
    return xbackend_here(*args, env=env)


def _available(name: str) -> bool:
    return {info.name: info.available for info in xbackend.backends()}[name]


def _points(out: Path) -> list[dict[str, object]]:
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return [line for line in lines if line["type"] == "point"]


@pytest.mark.slow
def test_version():
    done = xb("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"xbackend {xbackend.__version__}"


@pytest.mark.slow
def test_plain_compare_runs_naive_tiled_and_vendor(compare_run):
    """compare_run names no variants: these are the defaults."""
    assert compare_run.returncode == 0, compare_run.stdout + compare_run.stderr
    assert compare_run.backends == (("cpu", "opencl") if _available("opencl") else ("cpu",))
    for backend in compare_run.backends:
        ran = {p["variant"] for p in _points(compare_run.out) if p["backend"] == backend}
        assert ran == {"naive", "tiled", "vendor"}


@pytest.mark.parametrize("name", ["assignment", "lab"])
def test_the_assignment_presets_run_naive_tiled_and_vendor(name):
    assert PRESETS[name].variants == ("naive", "tiled", "vendor")
    assert PRESETS["chapter"].variants == ("naive4", "naive", "tiled", "vendor")
    assert PRESETS["blog"].variants is None  # every variant, as before


def test_the_ladder_is_every_rung_of_the_backends_tables():
    if not _available("opencl"):
        pytest.skip("opencl unavailable")
    opencl = xbackend.get_backend("opencl")
    with opencl:
        opened = [("cpu", CpuBackend()), ("opencl", opencl)]
        for op in ("mm", "rmm"):
            rungs = resolve_variants(["ladder"], opened, [op])
            assert rungs == [v for v in opencl.variants(op) if v not in NOT_LADDER]
            assert rungs and "naive4" not in (rungs or [])
        assert resolve_variants(["all"], opened, ["mm"]) is None
        assert resolve_variants(["ladder", "naive"], opened, ["mm"])[-1] == "naive"  # type: ignore[index]


@pytest.mark.slow
def test_compare_variants_ladder_runs_the_ladder(tmp_path):
    if not _available("opencl"):
        pytest.skip("opencl unavailable")
    out = tmp_path / "run"
    done = xb("compare", "--backends", "opencl", "--variants", "ladder", "--sizes", "16x16",
              "--samples", "1", "--no-plots", "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    with xbackend.get_backend("opencl") as opencl:
        rungs = {v for v in opencl.variants("mm") if v not in NOT_LADDER}
    assert {p["variant"] for p in _points(out)} == rungs


@pytest.mark.slow
def test_a_ladder_no_backend_has_is_a_clear_error(tmp_path):
    done = xb("compare", "--backends", "cpu", "--variants", "ladder", "--sizes", "8x8",
              "--out", str(tmp_path / "run"))  # fmt: skip
    assert done.returncode == 2 and "no variants of ladder" in done.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path):
    out = tmp_path / "run"
    done = xb("compare", "--backends", "cpu", "--steps", "3", "--variants", "naive,vendor",
              "--dry-run", "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not out.exists()
    assert "2 configurations × 3 sizes = 6 points" in done.stdout
    assert "cpu mm naive float32: 3 sizes" in done.stdout
    assert "predicted time: unknown" in done.stdout
    assert "code equality" not in done.stdout


@pytest.mark.slow
def test_dry_run_of_a_resume_predicts_from_the_recorded_times(vendor_run, tmp_path):
    assert vendor_run.returncode == 0, vendor_run.stderr
    out = tmp_path / "run"
    shutil.copytree(vendor_run.out, out)  # a resume opens the folder: a copy of its own
    before = (out / "results.jsonl").read_text()
    done = xb("compare", "--backends", "cpu", "--variants", "vendor", "--no-plots",
              "--steps", "3", "--out", str(out), "--resume", "--dry-run")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "2 recorded already" in done.stdout
    assert re.search(r"predicted time: [\d.]+ (s|ms|µs|ns)", done.stdout), done.stdout
    assert (out / "results.jsonl").read_text() == before


@pytest.mark.slow
def test_quiet_prints_the_summary_and_no_point_lines(vendor_run):
    assert vendor_run.returncode == 0, vendor_run.stderr
    stdout = vendor_run.stdout  # compare -q
    assert "code equality: True" not in stdout and "[1/2]" not in stdout
    assert "largest verified" in stdout and "code equality: 2/2" in stdout


@pytest.mark.slow
def test_compare_table_prints_a_table_per_size_and_writes_it(compare_run):
    assert compare_run.returncode == 0, compare_run.stderr  # compare --table
    assert compare_run.stdout.count("naive") >= 3  # the summary's row and one per size
    for m, k in ((16, 14), (32, 28), (48, 42)):  # the table's block of each size
        assert f"size {m}×{k} · {k}×{m}" in compare_run.stdout
    assert (compare_run.out / "sizes.csv").exists()


@pytest.mark.slow
def test_skip_reasons_are_noted_under_the_summary(tmp_path):
    done = xb("compare", "--backends", "cpu", "--variants", "naive", "--steps", "6",
              "--budget", "0.000001", "--samples", "1", "--no-plots",
              "--out", str(tmp_path / "run"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stdout.splitlines() if line.startswith("[")]
    assert sum("skipped: estimated" in line for line in said) == 1  # once, not per size
    assert "cpu mm naive float32: 4 of 6 skipped: estimated" in done.stdout


@pytest.mark.slow
def test_compare_help_names_the_default_folder_and_the_variant_sets(compare_help):
    text = compare_help.stdout
    assert "results/run-<date-time>" in text
    for word in ("ladder", "all", "--dry-run", "--quiet", "--table"):
        assert word in text


@pytest.mark.slow
def test_tune_show_needs_no_backend(tmp_path):
    done = xb("tune", "--show", env={"XBACKEND_TUNE_CACHE": str(tmp_path / "tuned.json")})
    assert done.returncode == 0, done.stderr
    assert "0 entries" in done.stdout


@pytest.mark.slow
def test_tune_takes_compares_option_names_and_keeps_the_old_ones():
    text = xb("tune", "--help").stdout
    assert "--backends" in text and "--op " in text
    assert "--backend " not in text and "--ops" not in text
    missing = xb("tune")
    assert missing.returncode == 2 and "tune needs --backends" in missing.stderr
    refused = xb("tune", "--backend", "cpu", "--ops", "bmm")
    assert refused.returncode == 2 and "cannot tune 'bmm'" in refused.stderr


@pytest.mark.slow
def test_tune_on_an_unavailable_backend_names_tunes_option():
    unavailable = [info.name for info in xbackend.backends() if not info.available]
    if not unavailable:
        pytest.skip("every backend is available here")
    done = xb("tune", "--backends", unavailable[0])
    assert done.returncode == 2
    assert "tune --backends" in done.stderr and "out of --backends" not in done.stderr


@pytest.mark.slow
def test_devices_aligns_variant_names_of_any_length(devices_run):
    done = devices_run
    assert done.returncode == 0, done.stdout + done.stderr
    blocks = re.split(r"^\S.*$", done.stdout, flags=re.M)
    for block in blocks:
        columns = {line.index("7×5") for line in block.splitlines() if "7×5" in line}
        assert len(columns) <= 1, block
