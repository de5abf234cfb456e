"""The command line, run as a user runs it: python -m xbackend ... (the compare runs that
tests only read are shared: ``compare_run`` and ``vendor_run`` in conftest.py); the other
commands here run in this process (``xbackend_here``), their output and files read alike."""

from __future__ import annotations

import base64
import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_xbackend, xbackend_here

import xbackend

ROOT = Path(__file__).resolve().parent.parent


def xb(*args: str) -> subprocess.CompletedProcess[str]:
    """The command in this process: these tests read what it says and writes (the shared
    runs of conftest.py are ``python -m xbackend`` itself, as a user runs it)."""
    return xbackend_here(*args)


def _available(name: str) -> bool:
    return {info.name: info.available for info in xbackend.backends()}[name]


@pytest.mark.slow
def test_compare_writes_results_figures_and_summary(compare_run):
    if "opencl" not in compare_run.backends:
        pytest.skip("opencl unavailable")
    out = compare_run.out
    assert compare_run.returncode == 0, compare_run.stderr
    assert "code equality: True" in compare_run.stdout
    assert "code equality: False" not in compare_run.stdout
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    points = [x for x in lines if x["type"] == "point"]
    # cpu: naive, tiled T=8, tiled T=16, vendor; opencl: naive and tiled at T=8, 16, and
    # vendor (CLBlast), which runs only where pyclblast is installed; 3 sizes.
    ran = [p for p in points if p["status"] == "ok"]
    clblast = any(p["backend"] == "opencl" and p["variant"] == "vendor" for p in ran)
    assert len(ran) == 3 * (4 + 4 + clblast)
    assert {p["backend"] for p in ran} == {"cpu", "opencl"}
    others = [p for p in points if p["status"] != "ok"]
    assert all(p["status"] == "skipped" and p["variant"] == "vendor" for p in others)
    assert all("pyclblast" in p["reason"] for p in others)
    for name in ("runtime_by_backend", "runtime_all", "gflops"):
        for suffix in (".png", ".svg"):
            assert (out / f"{name}{suffix}").stat().st_size > 1000
    assert (out / "results.csv").read_text().count("\n") == len(points) + 1
    assert "largest verified" in compare_run.stdout and "48×42·42×48" in compare_run.stdout


@pytest.mark.slow
def test_plot_redraws_from_results(vendor_run, tmp_path):
    assert vendor_run.returncode == 0, vendor_run.stderr
    assert not (vendor_run.out / "gflops.png").exists()  # compare --no-plots drew nothing
    figures = tmp_path / "figures"
    done = xb("plot", str(vendor_run.out), "--out", str(figures))
    assert done.returncode == 0, done.stderr
    assert (figures / "gflops.png").exists() and (figures / "runtime_all.svg").exists()


@pytest.mark.slow
def test_devices_lists_backends_and_runs_a_tiny_product(devices_run):
    done = devices_run
    assert done.returncode == 0, done.stdout + done.stderr
    assert "cpu: available" in done.stdout
    assert "PASS  naive" in done.stdout and "FAIL" not in done.stdout
    for info in xbackend.backends():
        if not info.available:
            assert f"{info.name}: unavailable: " in done.stdout


def test_devices_says_the_shared_memory_a_launch_may_ask_for():
    """A CUDA device's opt-in shared memory is said beside what a kernel may declare; a
    device without one (OpenCL, the CPU) says the one size."""
    from xbackend.cli.devices import local_memory

    cuda = xbackend.DeviceInfo("H100", local_mem_bytes=48 << 10, local_mem_opt_in_bytes=227 << 10)
    assert local_memory(cuda) == "48 KiB, 227 KiB asked for at launch"
    assert local_memory(xbackend.DeviceInfo("CPU", local_mem_bytes=32 << 10)) == "32 KiB"
    assert local_memory(xbackend.DeviceInfo("?")) == "?"


@pytest.mark.slow
def test_unknown_backend_is_a_clear_error():
    done = xb("compare", "--backends", "cpu,metal", "--steps", "1")
    assert done.returncode == 2
    assert "unknown backend 'metal'" in done.stderr and "known backends" in done.stderr


@pytest.mark.slow
def test_explicit_unavailable_backend_fails_with_reason(monkeypatch):
    unavailable = [info for info in xbackend.backends() if not info.available]
    if not unavailable:
        pytest.skip("every backend is available here")
    name = unavailable[0].name
    done = xb("compare", "--backends", f"cpu,{name}", "--steps", "1")
    assert done.returncode == 2
    assert f"backend '{name}' is unavailable" in done.stderr


@pytest.mark.slow
def test_auto_says_what_it_skipped(tmp_path):
    done = xb("compare", "--variants", "vendor,tiled", "--steps", "1", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    for info in xbackend.backends():
        if not info.available:
            assert f"auto: skipping {info.name}: " in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, message",
    [
        (["--sizes", "16by14"], "bad size"),
        (["--tile", "sixteen"], "tiles are integers"),
        (["--steps", "0"], "at least 1"),
        (["--variants", "fastest", "--backends", "cpu"], "unknown variant"),
    ],
)
def test_bad_options_are_usage_errors(args, message):
    done = xb("compare", *args)
    assert done.returncode == 2
    assert message in done.stderr


@pytest.mark.slow
def test_help_describes_every_command(compare_help):
    done = xb("--help")
    assert done.returncode == 0
    for command in ("devices", "compare", "plot"):
        assert command in done.stdout
    assert compare_help.returncode == 0, compare_help.stderr
    for option in ("--backends", "--variants", "--tile", "--sizes", "--base", "--steps", "--out"):
        assert option in compare_help.stdout


@pytest.mark.slow
def test_tune_checks_candidates_and_caches_the_best(tmp_path, monkeypatch):
    if not _available("opencl"):
        pytest.skip("opencl unavailable")
    cache = tmp_path / "tuned.json"
    monkeypatch.setenv("XBACKEND_TUNE_CACHE", str(cache))
    done = xb("tune", "--backend", "opencl", "--variants", "vec4_db", "--sizes", "40x300x36",
              "--samples", "1")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    entries = json.loads(cache.read_text())["entries"]
    assert len(entries) == 2  # mm and rmm
    for op, (key, entry) in zip(("mm", "rmm"), sorted(entries.items()), strict=True):
        assert key.startswith("opencl|") and f"|vec4_db|{op}|float32|" in key
        assert entry["shape"] == "40×300 · 300×36" and entry["tflops"] > 0
        assert entry["blocks"] >= 1
    shown = xb("tune", "--backend", "opencl", "--show")
    assert all(key in shown.stdout for key in entries)
    refused = xb("tune", "--backend", "opencl", "--variants", "tiled")
    assert refused.returncode != 0 and "not tuned" in refused.stderr
    refused = xb("tune", "--backend", "opencl", "--ops", "bmm")
    assert refused.returncode != 0 and "cannot tune 'bmm'" in refused.stderr


def test_tune_cache_serves_the_neighbouring_class_without_splits(tmp_path, monkeypatch):
    """A large-class choice serves medium products, never small ones (they split K)."""
    from types import SimpleNamespace

    from xbackend import tuning
    from xbackend.launches.warp import WarpConfig

    monkeypatch.setenv("XBACKEND_TUNE_CACHE", str(tmp_path / "tuned.json"))
    stub = SimpleNamespace(name="cuda", device=SimpleNamespace(name="GPU"))
    config = WarpConfig(128, 256, 8, 64, 64, 16, 8)
    key = "|".join(("cuda", "GPU", "vec4", "mm", "float32", "large"))
    tuning.save_entries({key: {"params": config.to_dict(), "blocks": 512}})
    assert tuning.lookup(stub, "vec4", "float32", "large") == config
    assert tuning.lookup(stub, "vec4", "float32", "medium") == config
    assert tuning.lookup(stub, "vec4", "float32", "small") is None
    assert tuning.lookup(stub, "warp", "float32", "medium") is None


def test_tune_cache_rmm_takes_its_own_choice_else_mms(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from xbackend import tuning
    from xbackend.launches.warp import WarpConfig

    monkeypatch.setenv("XBACKEND_TUNE_CACHE", str(tmp_path / "tuned.json"))
    stub = SimpleNamespace(name="cuda", device=SimpleNamespace(name="GPU"))
    for_mm, for_rmm = WarpConfig(128, 128, 8, 64, 64, 16, 8), WarpConfig(128, 256, 8, 64, 64, 16, 8)
    key = "|".join(("cuda", "GPU", "warp", "{}", "float32", "large")).format
    tuning.save_entries({key("mm"): {"params": for_mm.to_dict(), "blocks": 1024}})
    assert tuning.lookup(stub, "warp", "float32", "large", "rmm") == for_mm
    tuning.save_entries(
        {
            key("mm"): {"params": for_mm.to_dict(), "blocks": 1024},
            key("rmm"): {"params": for_rmm.to_dict(), "blocks": 128},
        }
    )
    assert tuning.lookup(stub, "warp", "float32", "large", "rmm") == for_rmm
    assert tuning.lookup(stub, "warp", "float32", "medium", "rmm") == for_rmm
    assert tuning.lookup(stub, "warp", "float32", "large") == for_mm


def test_tune_cache_refits_a_split_to_the_output(tmp_path, monkeypatch):
    """A split tuned on a 1000×1000 output (32 tiles × 4 ranges) gives a 500×500 output
    (8 tiles) as many blocks where K allows, and keeps an output of the tuned size."""
    from types import SimpleNamespace

    from xbackend import tuning
    from xbackend.launches.warp import MIN_K_SLICE, WarpConfig

    monkeypatch.setenv("XBACKEND_TUNE_CACHE", str(tmp_path / "tuned.json"))
    stub = SimpleNamespace(name="cuda", device=SimpleNamespace(name="GPU"))
    split = WarpConfig(128, 256, 8, 64, 64, 16, 8, slices=4)
    key = "|".join(("cuda", "GPU", "warp", "mm", "float32", "small"))
    tuning.save_entries({key: {"params": split.to_dict(), "blocks": 128}})
    found = tuning.lookup(stub, "warp", "float32", "small", size=(1000, 1000, 3001))
    assert found == split
    found = tuning.lookup(stub, "warp", "float32", "small", size=(500, 500, 16 * MIN_K_SLICE))
    assert found == split.with_slices(16)
    found = tuning.lookup(stub, "warp", "float32", "small", size=(500, 500, 3001))
    assert found == split.with_slices(3001 // MIN_K_SLICE)
    assert tuning.lookup(stub, "warp", "float32", "small") == split  # no size: as tuned


def test_tune_keeps_the_untuned_choice_where_it_beats_every_candidate():
    """A refitted split can lie outside the search space and beat all of it."""
    from xbackend import tuning
    from xbackend.launches.warp import WarpConfig
    from xbackend.problems import Shape

    config = WarpConfig(128, 128, 16, 32, 64, 8, 8)
    trials = [tuning.Trial(config.with_slices(s), float(s), "ok") for s in (1, 2, 3)]
    trials.append(tuning.Trial(config.with_slices(6), None, "wrong"))
    result = tuning.TuneResult(
        "warp_db", "rmm", Shape(1000, 3001, 1000), "small", trials,
        tuning.Trial(config.with_slices(8), 4.0, "ok"),
    )  # fmt: skip
    assert result.best is not None
    assert result.best.config.slices == 8 and result.untuned_tflops == 4.0
    result.untuned = tuning.Trial(config.with_slices(8), None, "wrong")
    assert result.best is not None
    assert result.best.config.slices == 3


@pytest.mark.slow
def test_compare_csv_tells_operations_and_batches_apart(tmp_path):
    out = tmp_path / "run"
    done = xb("compare", "--op", "mm,bmm", "--sizes", "16x16", "--backends", "cpu",
              "--variants", "tiled", "--samples", "2", "--out", str(out),
              "--no-plots")  # fmt: skip
    assert done.returncode == 0, done.stderr
    with (out / "results.csv").open(newline="") as file:
        rows = list(csv.DictReader(file))
    assert sorted((row["op"], row["batch"]) for row in rows) == [("bmm", "8"), ("mm", "1")]
    host = json.loads((out / "results.jsonl").read_text().splitlines()[0])["environment"]["host"]
    assert all(row["host"] == host and row["step"] == "1" for row in rows)
    assert all(row["tile"].isdigit() for row in rows)  # an integer column


@pytest.mark.slow
def test_compare_draws_each_figure_once_and_the_report_shows_them(compare_run):
    out = compare_run.out
    assert compare_run.returncode == 0, compare_run.stderr
    markdown = (out / "report.md").read_text()
    for name in ("runtime_by_backend", "runtime_all", "gflops"):
        assert f"]({name}.png)" in markdown  # the run folder's own figure
        assert not list(out.rglob(f"report_figures/**/{name}.png"))
    page = (out / "report.html").read_text()
    png = base64.b64encode((out / "runtime_all.png").read_bytes()).decode()
    assert f"data:image/png;base64,{png}" in page


@pytest.mark.slow
def test_the_run_header_keeps_the_xbackend_settings(vendor_run):
    assert vendor_run.returncode == 0, vendor_run.stderr
    header = json.loads((vendor_run.out / "results.jsonl").read_text().splitlines()[0])
    assert header["environment"]["settings"]["XBACKEND_EXAMPLE_SETTING"] == "on"
    # OpenBLAS's idle threads sleep at once in a run (xbackend/__init__.py), and it says so
    assert header["environment"]["settings"]["OPENBLAS_THREAD_TIMEOUT"] == "4"


def test_openblas_s_idle_threads_sleep_unless_the_user_says_otherwise():
    """Set before NumPy loads OpenBLAS (importing xbackend first, as the command does); a
    value the user set is kept."""
    code = (
        "import os, sys\n"
        "class Watch:  # says the variable when NumPy (and so OpenBLAS) is first imported\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'numpy':\n"
        "            print(os.environ.get('OPENBLAS_THREAD_TIMEOUT'))\n"
        "            sys.meta_path.remove(self)\n"
        "sys.meta_path.insert(0, Watch())\n"
        "import xbackend\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(xbackend.__file__).parent.parent),
                                         env.get("PYTHONPATH", "")])  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.stdout.split() == ["4"], done.stderr
    env["OPENBLAS_THREAD_TIMEOUT"] = "28"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.stdout.split() == ["28"], done.stderr


@pytest.mark.slow
def test_a_command_run_here_says_what_its_own_process_says(tmp_path):
    """``xbackend_here`` (conftest.py), which most tests of a command use, against the
    command line in a process of its own: the same exit status, stdout and stderr for a
    usage error, a warning (a tune cache that is no JSON, said once a process) and the
    line a child of ``check`` writes (a refused manifest, said by its own process)."""
    cache = tmp_path / "tuned.json"
    cache.write_text("{not json")
    folder = tmp_path / "broken"
    shutil.copytree(ROOT / "examples" / "assignment" / "student", folder)
    with (folder / "family.toml").open("a") as manifest:
        manifest.write("junk = [\n")
    commands = [
        (("compare", "--steps", "abc"), {}),
        (("tune", "--show"), {"XBACKEND_TUNE_CACHE": str(cache)}),
        (("check", str(folder), "--backends", "opencl", "--sanitize", "off", "--no-times"), {}),
    ]
    for args, env in commands:
        apart, here = run_xbackend(*args, env=env), xbackend_here(*args, env=env)
        assert apart.stderr, args  # each says something there: the comparison is not vacuous
        assert (here.returncode, here.stdout, here.stderr) == (
            apart.returncode, apart.stdout, apart.stderr
        ), args  # fmt: skip
