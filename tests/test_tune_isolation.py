"""Issue 54, item 13: ``tune --kernels`` and ``limits`` ran a user's kernels in xbackend's
own process with no deadline: a kernel that never returned hung the tune for good
(``XBACKEND_KERNEL_TIMEOUT`` not applied, SIGTERM and Ctrl-C ignored while it ran), and one
that crashed took the whole tune down. Now each runs in a process of its own under the
deadline, as ``compare``'s do (xbackend/sweep/isolation.py): a hang or a crash is that
candidate's (or size's) failure, said, and the tune goes on. A tune on a Dask cluster
(``--workers``) too: its workers measure a user's candidates the same way
(``tune_isolation.Isolated``), under the deadline the request carries.

The kernels: tests/kernels/tune_isolation/ (one variant, right at tile 4, hung at 8,
crashing at 16) and tests/kernels/round4_isolation/ (iso_good, iso_hang, iso_crash).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from xbackend import families, tuning
from xbackend.cli import main
from xbackend.launches.choices import ParameterChoice
from xbackend.operations import Shape
from xbackend.pytest_plugin import needs_backend
from xbackend.sweep.isolation import TIMEOUT_ENV
from xbackend.tuning.racing import CandidateFailed, Finalist, race

ROOT = Path(__file__).resolve().parent.parent
TILES = ROOT / "tests" / "kernels" / "tune_isolation"
ISOLATION = ROOT / "tests" / "kernels" / "round4_isolation"
VARIANT = "tiles_misbehave"
# Seconds a step of a user's candidate gets here: the right tile's build and first runs
# take well under a second on the 2-core machine; a hang costs the test this.
DEADLINE = "6"
HUNG = f"timed out after {DEADLINE} s: the kernel did not return"
CRASHED = "the kernel's process died of SIGSEGV"
# A write far out of bounds kills the process on a CPU's runtime; NVIDIA's driver reports it
# as the run's error instead (seen on an H200, driver 580.159.04): either ends the candidate.
FAULTED = (CRASHED, "LogicError: clWaitForEvents failed")
TIMEOUT_S = 180  # the whole command, at most: a regression hangs, the test does not


def _env(cache: Path) -> dict[str, str]:
    path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path), "PYTHONUNBUFFERED": "1",
            tuning.CACHE_ENV: str(cache)}  # fmt: skip


def _tune_args(deadline: str = DEADLINE) -> list[str]:
    return [
        sys.executable, "-m", "xbackend", "tune", "--kernels", str(TILES), "--backends",
        "opencl", "--variants", VARIANT, "--sizes", "33x65x7", "--op", "mm", "--seed", "54",
        "--kernel-timeout", deadline, "--finalist-time", "0.5",
    ]  # fmt: skip


# -- the race: a finalist whose run fails leaves it -------------------------------------------


def _sampler(failing: set[str], rng: np.random.Generator):
    def sample(config: ParameterChoice, count: int) -> list[float]:
        if config.label in failing:
            raise CandidateFailed(f"{config.label}: {CRASHED} during a timed sample")
        scale = 1e-3 if config.label == "A=1" else 2e-3
        return list(scale * (1 + 0.01 * rng.random(count)))

    return sample


def _finalists() -> list[Finalist]:
    labels = [ParameterChoice((("A", value),)) for value in (1, 2, 3)]
    return [Finalist(config, default=index == 2) for index, config in enumerate(labels)]


def test_a_finalist_whose_run_fails_leaves_the_race_and_the_others_race_on():
    rng = np.random.default_rng(5413)
    racers = _finalists()
    outcome = race(racers, _sampler({"A=2"}, rng), time_cap_s=1.0, turn_samples=5)
    failed = next(finalist for finalist in racers if finalist.config.label == "A=2")
    assert failed.failure.startswith(f"A=2: {CRASHED}")
    assert outcome.winner.config.label == "A=1"
    assert failed not in outcome.finalists
    assert all(len(finalist.samples_s) >= 5 for finalist in outcome.finalists)


def test_a_race_whose_every_finalist_fails_says_so():
    rng = np.random.default_rng(5413)
    racers = _finalists()
    with pytest.raises(CandidateFailed, match=CRASHED):
        race(racers, _sampler({"A=1", "A=2", "A=3"}, rng), time_cap_s=1.0)
    assert all(finalist.failure for finalist in racers)


# -- the deadline, read before anything runs --------------------------------------------------


COMMANDS = {"tune": ["tune", "--backends", "cpu"], "limits": ["limits", "--backends", "cpu"]}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_deadline_that_is_no_number_is_refused_before_anything_runs(
    command, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv(TIMEOUT_ENV, "soon")
    monkeypatch.setenv(tuning.CACHE_ENV, str(tmp_path / "tuned.json"))
    out = ["--out", str(tmp_path / "out")] if command == "limits" else []
    assert main([*COMMANDS[command], *out]) == 2
    said = capsys.readouterr().err
    assert f"{TIMEOUT_ENV}='soon': set it to a number of seconds above 0" in said
    assert not (tmp_path / "out").exists() and not (tmp_path / "tuned.json").exists()


# -- tune --kernels: a hang and a crash are their candidates' failures -------------------------


@pytest.fixture
def _opencl() -> None:
    needs_backend("opencl")


@pytest.mark.slow
@pytest.mark.usefixtures("_opencl")
def test_a_tile_that_hangs_and_one_that_crashes_are_failures_and_the_tune_goes_on(tmp_path):
    cache = tmp_path / "tuned.json"
    began = time.monotonic()
    done = subprocess.run(_tune_args(), capture_output=True, text=True, env=_env(cache),
                          timeout=TIMEOUT_S)  # fmt: skip
    assert time.monotonic() - began < 120
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stdout.splitlines()
    assert any(line.strip().startswith("[1] T=4: ") and "GFLOP/s" in line for line in lines)
    assert any(line.strip().startswith(f"[2] T=8: {HUNG}") for line in lines), done.stdout
    assert any(line.strip().startswith(tuple(f"[3] T=16: {f}" for f in FAULTED))
               for line in lines), done.stdout  # fmt: skip
    (entry,) = json.loads(cache.read_text())["entries"].values()
    assert entry["params"] == {"TILE": 4}


@pytest.mark.slow
@pytest.mark.usefixtures("_opencl", "own_families")
def test_a_cluster_tune_isolates_a_candidate_that_hangs_and_one_that_crashes(tmp_path, monkeypatch):
    """On a worker the candidates ran in the worker's own process: the hung tile hung the
    tune for good, the crashing one killed the worker. Now each is its candidate's failure,
    under the deadline of the request (XBACKEND_KERNEL_TIMEOUT unset: 120 s otherwise)."""
    pytest.importorskip("distributed", reason="Dask is not installed ([dask] extra)")
    from xbackend.cluster import Cluster, ClusterSpec, TuneRequest

    monkeypatch.delenv(TIMEOUT_ENV, raising=False)
    monkeypatch.setenv(tuning.CACHE_ENV, str(tmp_path / "tuned.json"))
    families.add_folders([TILES])
    request = TuneRequest(
        variants=(VARIANT,), sizes=(Shape(33, 65, 7),), gpu_sizes=(), cpu_sizes=(),
        dtype="float32", ops=("mm",), seed=54, samples=3, finalist_time_s=0.5,
        kernel_timeout_s=float(DEADLINE),
    )  # fmt: skip
    said: list[str] = []
    finished: list[Any] = []  # what cluster.tune returns
    cluster = Cluster.start(ClusterSpec(workers=1), "opencl", say=said.append)
    try:
        tune = threading.Thread(target=lambda: finished.append(cluster.tune(request, said.append)),
                                daemon=True)  # fmt: skip
        tune.start()
        tune.join(timeout=120)
        assert finished, f"the cluster tune hung: {said}"
    finally:
        cluster.close()
    ((label, _, results),) = finished[0]
    assert label == "opencl" and not isinstance(results, str), results
    assert not any("died" in line for line in said), said  # the worker lived
    (result,) = results
    status = {trial.config.label: trial.status for trial in result.trials}
    assert status["T=4"] == "ok", status
    assert status["T=8"].startswith(HUNG), status
    assert status["T=16"].startswith(FAULTED), status
    assert result.best is not None and result.best.config.label == "T=4"


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.slow
@pytest.mark.usefixtures("_opencl")
@pytest.mark.parametrize("sent", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_a_tune_whose_candidate_hangs(tmp_path, sent):
    """The hung tile (T=8) runs under a deadline far away; the signal ends the tune at once,
    its candidate's process with it."""
    args = _tune_args(deadline="600")
    tune = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(tmp_path / "tuned.json"))  # fmt: skip
    try:
        assert tune.stdout is not None
        for line in tune.stdout:  # the right tile timed: the hung one is next
            if line.strip().startswith("[1] T=4: "):
                break
        time.sleep(2)
        children = _children(tune.pid)
        assert children, "the hung candidate runs in a process of its own"
        tune.send_signal(sent)
        code = tune.wait(timeout=30)
    finally:
        if tune.poll() is None:
            tune.kill()
            tune.wait()
    assert code == 128 + sent
    assert "xbackend: interrupted" in (tune.stderr.read() if tune.stderr else "")
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{child}").exists() for child in children):
        assert time.monotonic() < deadline, "the candidate's process outlived the tune"
        time.sleep(0.1)


# -- limits: a user's kernel that hangs or crashes is its line's error -------------------------


@pytest.mark.slow
@pytest.mark.usefixtures("_opencl")
def test_limits_of_kernels_that_hang_or_crash_end_their_lines_not_the_command(tmp_path):
    out = tmp_path / "limits"
    args = [
        sys.executable, "-m", "xbackend", "limits", "--kernels", str(ISOLATION), "--backends",
        "opencl", "--variants", "iso_hang,iso_crash,iso_good", "--start", "16", "--budget",
        "0.05", "--kernel-timeout", DEADLINE, "--seed", "54", "--out", str(out),
    ]  # fmt: skip
    done = subprocess.run(args, capture_output=True, text=True, env=_env(tmp_path / "t.json"),
                          timeout=TIMEOUT_S)  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr  # errors recorded; nothing died
    assert "Traceback" not in done.stderr
    lines = (out / "results.jsonl").read_text().splitlines()
    points = [item for item in map(json.loads, lines) if item["type"] == "point"]
    first = {point["variant"]: point for point in reversed(points)}  # each line's first size
    assert first["iso_hang"]["status"] == "error"
    assert first["iso_hang"]["reason"].startswith(HUNG)
    assert first["iso_crash"]["status"] == "error"
    assert first["iso_crash"]["reason"].startswith(FAULTED)
    good = [point for point in points if point["variant"] == "iso_good"]
    assert good[0]["status"] == "ok" and good[0]["equal"] is True
