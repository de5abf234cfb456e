"""Issue 38 ("Reliability round 4"), the cluster's side: an error raised on a worker is the
serial run's one line and exit status (17); what Dask logs of workers killed under their
tasks is left out (18); every signal that ends a cluster run (SIGTERM, SIGHUP, SIGINT)
tears its shared references down (19)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import xbackend

distributed = pytest.importorskip("distributed", reason="Dask is not installed ([dask] extra)")

ROOT = Path(__file__).resolve().parent.parent
SMALL = ["--variants", "naive", "--base", "16x14", "--steps", "2", "--samples", "3",
         "--min-samples", "1", "--no-plots"]  # fmt: skip


def _env(**extra: str) -> dict[str, str]:
    path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    if "PYTHONPATH" in extra:
        path.insert(0, extra.pop("PYTHONPATH"))
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path), **extra}


def _xbackend(*argv: str, env: dict[str, str]) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "xbackend", *argv],
        capture_output=True, text=True, env=env, timeout=180,
    )  # fmt: skip
    return done.returncode, done.stderr


def _opencl_or_skip() -> None:
    if not {i.name: i.available for i in xbackend.backends()}["opencl"]:
        pytest.skip("opencl unavailable: the cluster runs the OpenCL CPU device and the CPU")


# -- 17: an error raised on a worker, as the serial run says it -------------------------------

# Families the workers find (an installed package's entry point, which each process looks
# up itself: --kernels is checked before any worker starts) and refuse, each with its own
# message.
BROKEN_MANIFESTS = {
    "a name that is a number": "[family]\nname = 5\n",
    "no [family] table": "[something]\nname = 'x'\n",
    "not TOML": "[family\nname = \n",
}


def _installed_families(site: Path) -> Path:
    """The folder of a package installed in ``site`` whose entry point (``xbackend.kernels``)
    names it as its folder of families, as an installed distribution's dist-info would."""
    package = site / "broken_families"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    info = site / "broken_families-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-families\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[xbackend.kernels]\nbroken = broken_families\n")
    return package


@pytest.mark.slow
@pytest.mark.parametrize("manifest", list(BROKEN_MANIFESTS), ids=list(BROKEN_MANIFESTS))
def test_a_family_broken_for_the_workers_is_the_serial_line(tmp_path, manifest):
    """Before: Dask's "Compute Failed" block with a traceback fragment, then "lost the
    local cluster's scheduler" (the closed client taken for a lost one)."""
    _opencl_or_skip()
    family = _installed_families(tmp_path / "site") / "broken"
    family.mkdir()
    (family / "family.toml").write_text(BROKEN_MANIFESTS[manifest])
    env = _env(PYTHONPATH=str(tmp_path / "site"))
    said = {}
    for how, extra in (("serial", []), ("cluster", ["--workers", "2"])):
        out = tmp_path / how
        argv = ["compare", "--backends", "opencl,cpu", *SMALL, *extra, "--out", str(out)]
        code, stderr = _xbackend(*argv, env=env)
        lines = stderr.strip().splitlines()
        assert code == 2 and len(lines) == 1, stderr
        assert "Traceback" not in stderr and "Compute Failed" not in stderr
        said[how] = lines[0]
        assert not (out / "results.jsonl").exists()
    assert said["cluster"] == said["serial"]
    assert str(family / "family.toml") in said["cluster"]


@pytest.mark.slow
@pytest.mark.parametrize("variants", ["naive", "tiled,naive"])
def test_nothing_to_tune_on_the_workers_is_one_line_and_exit_2(tmp_path, variants):
    """Before: "Compute Failed" and its traceback fragment, then "not tuned: ..." and exit 1
    (serially: one line, exit 2)."""
    env = _env(XBACKEND_TUNE_CACHE=str(tmp_path / "tuned.json"))
    argv = ["tune", "--backends", "cpu", "--variants", variants, "--sizes", "16x16"]
    for extra in ([], ["--workers", "2"]):
        code, stderr = _xbackend(*argv, *extra, env=env)
        lines = stderr.strip().splitlines()
        assert code == 2 and len(lines) == 1, stderr
        assert lines[0].startswith("xbackend: error: cpu") and "tuned" in lines[0]
        assert "Traceback" not in stderr and "Compute Failed" not in stderr
    assert not (tmp_path / "tuned.json").exists()


# -- 18: what Dask logs of workers killed under their tasks ----------------------------------


def _record(logger: str, message: str, error: BaseException | None = None) -> logging.LogRecord:
    exc_info = (type(error), error, None) if error is not None else None
    return logging.getLogger(logger).makeRecord(
        logger, logging.ERROR, __file__, 1, message, (), exc_info
    )


def test_what_dask_says_of_a_killed_worker_is_left_out_and_nothing_else():
    from distributed.client import AllExit
    from distributed.comm.core import CommClosedError
    from tornado.iostream import StreamClosedError

    from xbackend.cluster.connection import _not_a_lost_worker

    rng = np.random.default_rng(38)
    key = f"measure-{rng.integers(1 << 62):x}"
    noise = [
        _record("distributed.scheduler", f"Couldn't gather keys: {{'{key}': 'memory'}}"),
        _record("asyncio", "Task exception was never retrieved", AllExit()),
        _record("distributed.client", "Exception", CommClosedError("in <TCP (closed)>")),
        _record("distributed.core", "Exception while handling op gather", StreamClosedError()),
        _record("tornado.application", "Exception in callback", CommClosedError()),
    ]
    kept = [
        _record("distributed.scheduler", f"Task {key} marked as failed"),
        _record("asyncio", "Task exception was never retrieved", ValueError("a real one")),
        _record("distributed.nanny", "Worker process died unexpectedly"),
        _record("distributed.client", "Exception", OSError("disk full")),
    ]
    assert [_not_a_lost_worker(record) for record in noise] == [False] * len(noise)
    assert [_not_a_lost_worker(record) for record in kept] == [True] * len(kept)


# A process of its own (as the command is: pytest would take Dask's log records itself)
# starts the cluster, has each worker run a task, kills KILLED workers after their tasks
# finished and asks for those results (as the driver does when a worker dies after it
# looked), then closes the cluster.
_KILLED_UNDER_RESULTS = """
import os, signal, sys, time
import distributed
from xbackend.cluster import Cluster, ClusterSpec

killed = int(sys.argv[1])
cluster = Cluster.start(ClusterSpec(workers=2, grace_s=30.0), "opencl,cpu", say=lambda _: None)
try:
    pids = cluster.client.run(os.getpid)
    addresses = sorted(pids)
    futures = [cluster.submit_to(os.getpid, address) for address in addresses]
    distributed.wait(futures, timeout=60)
    for address in addresses[:killed]:
        os.kill(pids[address], signal.SIGKILL)
    for future in futures[:killed]:
        try:
            future.result(timeout=5)
        except Exception:
            pass
    time.sleep(1.0)  # what Dask's tasks log as they end
finally:
    cluster.close()
print("closed")
"""


@pytest.mark.slow
@pytest.mark.parametrize("killed", [1, 2])
def test_a_result_on_killed_workers_leaves_no_dask_traceback(killed):
    """The race of the issue, made certain: a task's result asked of a worker killed after
    it finished (the driver looked a moment before), one or both workers killed. Before:
    "Couldn't gather keys" and an AllExit or CommClosedError traceback on stderr."""
    _opencl_or_skip()
    done = subprocess.run(
        [sys.executable, "-c", _KILLED_UNDER_RESULTS, str(killed)],
        capture_output=True, text=True, env=_env(), timeout=180,
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == "closed", done.stderr
    for said in ("Couldn't gather", "CommClosedError", "AllExit", "Traceback"):
        assert said not in done.stderr, done.stderr


# -- 19: every signal that ends a cluster run tears its shared memory down --------------------

# The shared references of the command's processes (the main one and its workers) go
# into $XBACKEND_TEST_SHM instead of /dev/shm, so that this test sees its own run's alone.
_SITECUSTOMIZE = """
import importlib.abc, importlib.machinery, os, pathlib, sys

class _Folder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "xbackend.cluster.host_references":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        run = spec.loader.exec_module
        def exec_module(module):
            run(module)
            module.SHARED_MEMORY = pathlib.Path(os.environ["XBACKEND_TEST_SHM"])
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, _Folder())
"""

ENDINGS = [
    ("SIGTERM", "main", 143),  # kill PID, timeout(1)
    ("SIGTERM", "group", 143),  # Slurm at a job's time limit: every process of the job
    ("SIGHUP", "main", 129),  # the terminal closed
    ("SIGINT", "main", 130),
    ("SIGINT", "group", 130),  # a terminal's Ctrl-C
]


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="signals of a POSIX system")
@pytest.mark.parametrize(("name", "to", "status"), ENDINGS, ids=[f"{n}-{t}" for n, t, _ in ENDINGS])
def test_a_signal_that_ends_a_cluster_run_removes_its_shared_references(tmp_path, name, to, status):
    """Before: SIGTERM and SIGHUP killed the main process where it stood, its run's
    references left in /dev/shm (600 MB a size at 6144^2)."""
    _opencl_or_skip()
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    shm = tmp_path / "shm"
    shm.mkdir()
    env = _env(PYTHONPATH=str(tmp_path / "site"), XBACKEND_TEST_SHM=str(shm))
    sweep = ["--backends", "opencl,cpu", "--variants", "naive", "--base", "24x21",
             "--steps", "12", "--min-samples", "1", "--min-time", "0.1", "--no-plots",
             "--workers", "2"]  # fmt: skip
    process = subprocess.Popen(
        [sys.executable, "-m", "xbackend", "compare", *sweep, "--out", str(tmp_path / "run")],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 90
    while not list(shm.glob("xbackend-*/references-*/*.json")):  # a reference is shared
        assert process.poll() is None and time.monotonic() < deadline, process.stderr
        time.sleep(0.02)
    number = getattr(signal, name)
    os.killpg(process.pid, number) if to == "group" else process.send_signal(number)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == status, stderr
    assert "Traceback" not in stderr, stderr
    time.sleep(1.0)  # a worker left behind would make its folder again meanwhile
    assert list(shm.glob("xbackend-*/references-*")) == []
