"""Issue 30, reliability round 3, the cluster's findings: a ``--scheduler`` that does not
answer, answers garbage, names a transport this host lacks, is malformed, or dies
mid-run is one line naming the option and the address (exit 2), each within seconds;
``--each-gpu`` without ``--gpus`` is a usage error; Ctrl-C while a local cluster starts
is the one interrupt line (exit 130); resuming a ``--scheduler`` run without the
cluster is refused, saying why its points would be measured again."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import xbackend
from xbackend.backends.cpu import CpuBackend
from xbackend.cli import main
from xbackend.operations import Shape
from xbackend.results import PointRecord, ResultsWriter, RunHeader, load
from xbackend.results.plan import Plan
from xbackend.sweep.runner import configs

pytest.importorskip("distributed", reason="Dask is not installed ([dask] extra)")

ROOT = Path(__file__).resolve().parent.parent
# Room for a command's start-up (Python, xbackend, Dask) on a loaded 2-core machine,
# above the bound a test checks: a wait that Dask's own connect timeout (30 s) ended, or
# no bound at all, still fails every such test.
STARTUP_S = 12.0
SMALL = ["--variants", "naive", "--base", "16x14", "--steps", "2", "--samples", "3",
         "--min-samples", "1", "--no-plots"]  # fmt: skip


def _xbackend(*argv: str, timeout_s: float = 40.0) -> tuple[int, str, float]:
    """``python -m xbackend ARGV``: its exit status, its stderr, and the seconds it took
    (a command that hangs past ``timeout_s`` fails the test instead of hanging it)."""
    path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "xbackend", *argv],
            capture_output=True, text=True, env=env, timeout=timeout_s,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"xbackend {' '.join(argv)!r} said nothing for {timeout_s:g} s")
    return done.returncode, done.stderr, time.monotonic() - started


def _one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[str]:
    """A TCP server on this host, in a thread: it accepts every connection, then says
    nothing (``silent``) or sends seeded random bytes (``garbage``). Its address."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    answer = np.random.default_rng(30).bytes(4096) if request.param == "garbage" else b""
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                continue
            accepted.append(connection)
            if answer:
                with contextlib.suppress(OSError):
                    connection.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join(timeout=5)
    for connection in accepted:
        connection.close()
    listener.close()


# -- 6: a scheduler that does not answer, or not as Dask does ---------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("server", ["silent"], indirect=True)
def test_a_scheduler_that_never_answers_is_one_line_within_seconds(server, tmp_path):
    code, stderr, took_s = _xbackend(
        "compare", "--backends", "cpu", *SMALL, "--scheduler", server, "--out", str(tmp_path)
    )
    line = _one_line(stderr)
    assert code == 2 and took_s < STARTUP_S + 5, (code, took_s)  # the default bound: 5 s
    assert "--scheduler" in line and server in line and "--connect-timeout" in line
    assert "no answer" in line
    assert not (tmp_path / "results.jsonl").exists()


@pytest.mark.slow
@pytest.mark.parametrize("server", ["silent"], indirect=True)
def test_the_connect_timeout_bounds_the_wait(server, tmp_path):
    argv = ["compare", "--backends", "cpu", *SMALL, "--scheduler", server]
    code, stderr, took_s = _xbackend(*argv, "--connect-timeout", "0.5", "--out", str(tmp_path))
    assert code == 2 and took_s < STARTUP_S + 0.5, (code, took_s)
    assert "within 0.5 s" in _one_line(stderr)


@pytest.mark.slow
@pytest.mark.parametrize("server", ["garbage"], indirect=True)
def test_a_scheduler_that_answers_garbage_is_one_line(server, tmp_path):
    code, stderr, took_s = _xbackend(
        "compare", "--backends", "cpu", *SMALL, "--scheduler", server, "--out", str(tmp_path)
    )
    line = _one_line(stderr)
    assert code == 2 and took_s < STARTUP_S + 5, (code, took_s)
    assert "--scheduler" in line and server in line and "not a Dask scheduler" in line
    assert "EiB" not in line


@pytest.mark.slow
def test_a_refused_connection_is_one_line_within_seconds(tmp_path):
    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{unused.getsockname()[1]}"
    argv = ["compare", "--backends", "cpu", *SMALL, "--scheduler", address]
    code, stderr, took_s = _xbackend(*argv, "--connect-timeout", "1", "--out", str(tmp_path))
    line = _one_line(stderr)
    assert code == 2 and took_s < STARTUP_S + 1, (code, took_s)
    assert "--scheduler" in line and address in line


@pytest.mark.slow
@pytest.mark.parametrize(
    ("address", "says"),
    [("ucx://127.0.0.1:8786", "distributed-ucxx"), ("tls://127.0.0.1:8786", "TLS")],
)
def test_a_transport_this_host_cannot_speak_is_one_line(address, says, tmp_path):
    code, stderr, took_s = _xbackend(
        "compare", "--backends", "cpu", *SMALL, "--scheduler", address, "--out", str(tmp_path)
    )
    line = _one_line(stderr)
    assert code == 2 and took_s < 15, (code, took_s)
    assert "--scheduler" in line and address in line and says in line


# -- 9: the address, checked before anything is tried ----------------------------------------


@pytest.mark.parametrize(
    ("address", "shown", "says"),
    [
        ("tcp://127.0.0.1:", "'tcp://127.0.0.1:'", "no port"),
        ("tcp://127.0.0.1:8786\n", "'tcp://127.0.0.1:8786\\n'", "control character"),
        ("tcp://127.0.0.1:87\x1b[31m86", "'tcp://127.0.0.1:87\\x1b[31m86'", "control character"),
        ("inproc://", "'inproc://'", "inproc://"),
        ("tcp://:8786", "'tcp://:8786'", "no host"),
        ("tcp://127.0.0.1:99999", "'tcp://127.0.0.1:99999'", "port"),
        ("tcp://127.0.0.1:8786/path", "'tcp://127.0.0.1:8786/path'", "port"),
        ("", "''", "empty"),
    ],
)
def test_a_malformed_scheduler_address_is_one_line_naming_it(address, shown, says, capsys):
    started = time.monotonic()
    assert main(["compare", "--backends", "cpu", "--scheduler", address, "--dry-run"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert time.monotonic() - started < 5  # refused before any connection is tried
    assert "--scheduler" in line and shown in line and says in line, line
    assert not re.search(r"[\x00-\x1f\x7f]", line)  # control characters shown, not sent


def test_a_well_formed_address_is_kept_as_dask_reads_it():
    from xbackend.cli.cluster import scheduler_address

    assert scheduler_address("tcp://login1:8786") == "tcp://login1:8786"
    assert scheduler_address("login1:8786") == "tcp://login1:8786"  # Dask's default scheme
    assert scheduler_address("tls://[::1]:8786") == "tls://[::1]:8786"


# -- 12: --each-gpu without --gpus --------------------------------------------------------------


def test_each_gpu_without_gpus_is_a_usage_error_naming_both(capsys):
    for cluster in ([], ["--workers", "2"]):
        assert main(["compare", "--backends", "cpu", "--each-gpu", *cluster, "--dry-run"]) == 2
        line = _one_line(capsys.readouterr().err)
        assert "--each-gpu" in line and "--gpus" in line


# -- 13: Ctrl-C while a local cluster starts; a --scheduler run resumed without it ------------


def _processes_of(session: int) -> list[int]:
    """The processes of a session (Linux), read from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[3]) == session:  # pid (comm) state ppid pgrp session
            found.append(int(entry.name))
    return found


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("after_s", [0.0, 0.4])
def test_ctrl_c_while_the_local_cluster_starts_is_the_one_interrupt_line(after_s, tmp_path):
    """Ctrl-C as the first worker process starts, and a moment later."""
    if not {i.name: i.available for i in xbackend.backends()}["opencl"]:
        pytest.skip("opencl unavailable: the local cluster runs the OpenCL CPU device and the CPU")
    path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    argv = ["compare", "--backends", "opencl,cpu", *SMALL, "--workers", "2"]
    process = subprocess.Popen(
        [sys.executable, "-m", "xbackend", *argv, "--out", str(tmp_path / "run")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while len(_processes_of(process.pid)) < 2:  # a worker process is being started
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.005)
    time.sleep(after_s)
    os.killpg(process.pid, signal.SIGINT)  # as a terminal's Ctrl-C: to every process
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "interrupted" in _one_line(stderr)
    deadline = time.monotonic() + 10
    while _processes_of(process.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _processes_of(process.pid) == []  # no worker left behind


def _a_scheduler_run(out: Path) -> None:
    """A results folder as a ``--scheduler`` run leaves it: lines named by device model."""
    plan = Plan(shapes=[Shape(16, 14, 16)], variants=["naive"], seed=30)
    cpu = CpuBackend()
    label = f"cpu:{cpu.device.name}"
    header = RunHeader("sched", plan=plan, cluster={"scheduler": "tcp://login1:8786"})
    with ResultsWriter(out, header) as writer:
        for config in configs(plan, [(label, cpu)]):
            writer.append(config.record("sched", plan.shapes[0], 1, plan.batch))


def test_resuming_a_scheduler_run_without_the_cluster_says_why_and_measures_nothing(
    tmp_path, capsys
):
    _a_scheduler_run(tmp_path)
    before = (tmp_path / "results.jsonl").read_text()
    argv = ["compare", "--backends", "cpu", *SMALL, "--seed", "30", "--resume"]
    assert main([*argv, "--out", str(tmp_path)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "--scheduler tcp://login1:8786" in line and "device model" in line
    assert "measure" in line and "again" in line
    assert (tmp_path / "results.jsonl").read_text() == before  # nothing measured or added
    points: list[PointRecord] = load([tmp_path]).points
    assert {point.label for point in points} == {f"cpu:{CpuBackend().device.name}"}


_CLUSTER = """
import sys, time
from distributed import LocalCluster
cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                       dashboard_address=None, memory_limit=0)
print(cluster.scheduler_address, flush=True)
time.sleep(600)
"""


@pytest.mark.slow
def test_a_scheduler_killed_mid_run_is_one_line_and_the_points_are_kept(tmp_path):
    """A scheduler (and its worker, in one process) killed after two points."""
    path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path), "PYTHONUNBUFFERED": "1"}
    cluster = subprocess.Popen(
        [sys.executable, "-c", _CLUSTER], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True, env=env,
    )  # fmt: skip
    try:
        assert cluster.stdout is not None
        address = cluster.stdout.readline().strip()
        argv = ["compare", "--backends", "cpu", "--variants", "naive", "--base", "24x21",
                "--steps", "40", "--samples", "3", "--min-samples", "1", "--no-plots"]  # fmt: skip
        out = tmp_path / "run"
        run = subprocess.Popen(
            [sys.executable, "-m", "xbackend", *argv, "--scheduler", address, "--out", str(out)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        assert run.stdout is not None
        seen = 0
        for line in run.stdout:
            seen += "code equality" in line
            if seen == 2:
                cluster.kill()
                break
        started = time.monotonic()
        _, stderr = run.communicate(timeout=60)
    finally:
        cluster.kill()
        cluster.wait()
    line = _one_line(stderr)
    assert run.returncode == 2 and time.monotonic() - started < 15, (run.returncode, stderr)
    assert "--scheduler" in line and address in line and "--resume" in line
    kept = [p for p in load([out]).points if p.status == "ok"]
    assert len(kept) >= 2
