"""The comparison on a Dask cluster: the serial run's points, none lost or duplicated
when a worker is killed, Ctrl-C and --resume as in the serial run; and the schedule's
rules, the devices each worker holds, the records' new fields (no Dask needed)."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import xbackend
import xbackend.families
from xbackend.backends.cpu import CpuBackend
from xbackend.cli import main
from xbackend.errors import XBackendError
from xbackend.launches.specs import DeviceInfo
from xbackend.measuring.timing import Sampling
from xbackend.operations import Shape
from xbackend.results import WORKER_LOST, PointRecord, ResultsWriter, RunHeader, load
from xbackend.results.plan import Plan, Target
from xbackend.sweep.progress import SweepDisplay
from xbackend.sweep.runner import Sweep, configs

distributed = pytest.importorskip("distributed", reason="Dask is not installed ([dask] extra)")

from xbackend.cluster import Cluster, ClusterSpec  # noqa: E402 - needs Dask
from xbackend.cluster import schedule as schedule_module  # noqa: E402
from xbackend.cluster import worker as worker_module  # noqa: E402
from xbackend.cluster.devices import (  # noqa: E402
    Offer,
    WorkerReport,
    local_workers,
    shared_gpu_labels,
)
from xbackend.cluster.driver import Driver  # noqa: E402
from xbackend.cluster.lines import RemoteLine  # noqa: E402
from xbackend.cluster.schedule import Lane, Schedule, batch  # noqa: E402
from xbackend.cluster.session import PROFILER  # noqa: E402
from xbackend.cluster.tune_share import TuneQueue  # noqa: E402
from xbackend.cluster.worker import DevicesPlugin  # noqa: E402
from xbackend.tuning.searching import TuneItem  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SMALL = ["--variants", "naive,tiled", "--base", "16x14", "--steps", "3",
         "--samples", "3", "--min-samples", "1", "--no-plots"]  # fmt: skip


def _opencl_or_skip() -> None:
    if not {i.name: i.available for i in xbackend.backends()}["opencl"]:
        pytest.skip("opencl unavailable: the cluster runs the OpenCL CPU device and the CPU")


def _points(out: Path) -> list[PointRecord]:
    return load([out]).points


# -- the cluster, for real: two worker processes on this host --------------------------------


@pytest.mark.slow
def test_two_workers_measure_the_serial_run_s_points(tmp_path, capsys):
    _opencl_or_skip()
    serial, spread = tmp_path / "serial", tmp_path / "spread"
    backends = ["--backends", "opencl,cpu"]
    assert main(["compare", *backends, *SMALL, "--out", str(serial)]) == 0
    assert main(["compare", *backends, *SMALL, "--workers", "2", "--out", str(spread)]) == 0
    assert "code equality: 12/12" in capsys.readouterr().out
    points = _points(spread)
    keys = [point.key for point in points]
    assert len(keys) == len(set(keys)) == 12
    assert set(keys) == {point.key for point in _points(serial)}
    assert all(point.status == "ok" and point.equal for point in points)
    assert {(point.label, point.worker) for point in points} == {("opencl", "w0"), ("cpu", "w1")}
    with (spread / "results.csv").open(newline="") as file:
        rows = list(csv.DictReader(file))
    assert {(row["label"], row["worker"]) for row in rows} == {("opencl", "w0"), ("cpu", "w1")}
    assert all(row["host"] for row in rows)
    (header,) = load([spread]).runs.values()
    workers = header.cluster["workers"]
    assert [(w["name"], w["devices"]) for w in workers] == [("w0", ["opencl"]), ("w1", ["cpu"])]
    assert header.cluster["concurrency"]["points_at_once"] == 1  # both are the host's CPU
    assert {d["worker"] for d in header.devices.values()} == {"w0", "w1"}


@pytest.mark.slow
def test_a_killed_worker_loses_no_point_and_duplicates_none(tmp_path):
    _opencl_or_skip()
    # From the third size on, a CPU point takes a quarter of a second: the kill lands
    # in the middle of one.
    shapes = [Shape(16 * i, 14 * i, 16 * i) for i in (1, 2, 16, 18, 20)]
    plan = Plan(
        shapes=shapes, variants=["naive"], seed=7, sampling=Sampling(max_samples=3, min_samples=1)
    )
    said: list[str] = []
    cluster = Cluster.start(ClusterSpec(workers=2, grace_s=30.0), "opencl,cpu", say=said.append)
    try:
        pids: dict[str, int] = cluster.client.run(os.getpid)
        # the workers measure in this process's environment, not Dask's one-thread BLAS
        names = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MALLOC_TRIM_THRESHOLD_")
        theirs = cluster.client.run(lambda: [os.environ.get(name) for name in names])
        assert list(theirs.values()) == [[os.environ.get(name) for name in names]] * 2
        # and without Dask's profiler, which takes the GIL every 10 ms
        profiling = cluster.client.run(lambda: __import__("dask").config.get(PROFILER))
        assert list(profiling.values()) == [False, False]
        cpu_worker = next(w.address for w in cluster.reports if w.name == "w1")
        finished: list[list[PointRecord]] = []
        run = threading.Thread(
            target=lambda: finished.append(
                cluster.run(plan, cluster.offered(), tmp_path, log=said.append)
            )
        )
        run.start()
        # the header, both lines' first two sizes and OpenCL's third: the CPU's is next
        _when(lambda: len(_lines(tmp_path)) >= 6 and _busy(cluster, cpu_worker))
        os.kill(pids[cpu_worker], signal.SIGKILL)  # the worker measuring a CPU point
        run.join(timeout=120)
        assert finished, "the run did not finish"
    finally:
        cluster.close()
    assert any("died while measuring cpu mm naive" in line for line in said), said
    points = _points(tmp_path)
    keys = [point.key for point in points]
    assert len(keys) == len(set(keys)) == 2 * len(plan.shapes)  # every point, once
    assert all(point.status == "ok" and point.equal for point in points)
    assert [p.M for p in points if p.label == "cpu"] == [s.M for s in plan.shapes]


def _lines(out: Path) -> list[str]:
    path = out / "results.jsonl"
    return path.read_text().splitlines() if path.exists() else []


def _busy(cluster: Cluster, address: str) -> bool:
    return bool(cluster.client.processing([address]).get(address))


def _when(condition: Any, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _compare(out: Path, *extra: str) -> subprocess.Popen[str]:
    path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path), "PYTHONUNBUFFERED": "1"}
    # each point samples at least 0.1 s: the points come back a line's sizes at a time,
    # and the run must still be going when the third has come
    sweep = ["--backends", "opencl,cpu", "--variants", "naive", "--base", "24x21", "--steps",
             "10", "--min-samples", "1", "--min-time", "0.1", "--no-plots"]  # fmt: skip
    return subprocess.Popen(
        [sys.executable, "-m", "xbackend", "compare", *sweep, "--out", str(out), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


@pytest.mark.slow
def test_ctrl_c_keeps_the_finished_points_and_a_resume_on_other_workers_finishes(tmp_path):
    _opencl_or_skip()
    out = tmp_path / "run"
    process = _compare(out, "--workers", "2")
    assert process.stdout is not None and process.stderr is not None
    seen = 0
    for line in process.stdout:
        seen += "code equality" in line
        if seen == 3:
            process.send_signal(signal.SIGINT)
            break
    process.wait(timeout=60)
    assert process.returncode == 130 and "--resume" in process.stderr.read()
    kept = [json.loads(line) for line in _lines(out)]  # every line whole
    assert 3 <= len([item for item in kept if item["type"] == "point"]) < 20

    resumed = _compare(out, "--workers", "1", "--resume")  # one worker holds both now
    stdout, stderr = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, stderr
    keys = [point.key for point in _points(out)]
    assert len(keys) == len(set(keys)) == 20
    assert "code equality: 20/20" in stdout


@pytest.mark.slow
def test_an_existing_cluster_runs_each_device_model(tmp_path, capsys):
    _opencl_or_skip()
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, dashboard_address=None, memory_limit=0
    ) as existing:
        argv = ["compare", "--backends", "opencl,cpu", *SMALL, "--steps", "2"]
        assert main([*argv, "--scheduler", existing.scheduler_address, "--out", str(tmp_path)]) == 0
        with distributed.Client(existing) as client:
            assert len(client.nthreads()) == 1  # left running, as it was
    points = _points(tmp_path)
    # The OpenCL device is the default one (on a GPU machine, its GPU: a worker of an
    # existing cluster opens a backend's GPUs where it has some).
    with xbackend.get_backend("opencl") as opencl:
        device = opencl.device.name
    assert {point.label for point in points} == {f"cpu:{CpuBackend().device.name}",
                                                 f"opencl:{device}"}  # fmt: skip
    assert len(points) == 8 and all(point.status == "ok" and point.equal for point in points)
    assert "code equality: 8/8" in capsys.readouterr().out


@pytest.mark.slow
def test_a_line_s_short_points_go_in_few_tasks_and_measure_the_serial_points(
    tmp_path, capsys, monkeypatch
):
    """A task measures a line's consecutive sizes while they are predicted short: 2 lines
    of 8 sizes each take a few tasks, not 16, and give the serial run's points. (No limit
    on a batch's time here: on a loaded machine a point's time, and so the batches, vary.)"""
    monkeypatch.setattr(schedule_module, "BATCH_S", 1e9)
    serial, spread = tmp_path / "serial", tmp_path / "spread"
    argv = ["compare", "--backends", "cpu", *SMALL, "--steps", "8"]
    assert main([*argv, "--out", str(serial)]) == 0
    capsys.readouterr()
    assert main([*argv, "--workers", "1", "--out", str(spread)]) == 0
    said = capsys.readouterr().out
    found = re.search(r"cluster: (\d+) points in (\d+) tasks", said)
    assert found is not None, said
    points, tasks = map(int, found.groups())
    # each line: its first two sizes alone (no time to predict from), then the rest
    assert points == 16 and tasks <= 6, said
    recorded = _points(spread)
    assert sorted(p.key for p in recorded) == sorted(p.key for p in _points(serial))
    assert all(point.status == "ok" and point.equal for point in recorded)
    (header,) = load([spread]).runs.values()
    assert header.cluster["concurrency"]["batch_s"] == 1e9


def test_a_batch_is_the_points_predicted_under_the_limit_and_stops_at_an_unknown():
    times = {1: 0.3, 2: 0.3, 3: 0.3, 4: 0.3, 5: None, 6: 0.1}
    assert batch(1, iter([2, 3, 4, 5, 6]), times.get, limit_s=1.0) == [1, 2, 3]
    assert batch(5, iter([6]), times.get, limit_s=1.0) == [5]  # unknown: alone
    assert batch(4, iter([5, 6]), times.get, limit_s=1.0) == [4]  # stops at the unknown
    assert batch(1, iter([2]), times.get, limit_s=0.1) == [1]  # too long: alone all the same
    assert batch(6, iter([]), times.get) == [6]


def test_a_worker_keeps_sizes_inputs_and_drops_the_oldest_past_the_limit(monkeypatch):
    """Kept by the bytes their operands and references hold (made as points use them)."""
    from xbackend.operations import operation

    plugin = DevicesPlugin("cpu")
    small, other, large = Shape(16, 14, 16), Shape(32, 28, 32), Shape(64, 56, 64)

    def used(shape: Shape, seed: int = 1) -> Any:
        inputs = plugin.inputs_for(shape, seed, 1)
        inputs.reference(operation("mm"), "float32")  # its operands and float64 reference
        return inputs

    sizes = {shape: used(shape).nbytes for shape in (small, other)}
    assert sizes[small] == 16 * 14 * 4 + 14 * 16 * 4 + 2 * 16 * 16 * 8  # A, B; C, |A||B|
    plugin.inputs.clear()
    monkeypatch.setattr(worker_module, "KEPT_BYTES", sizes[small] + sizes[other])
    first = used(small)
    assert used(other) is not first
    assert used(small) is first  # kept: both fit
    assert used(small, seed=2) is not first  # another seed is another input
    used(small, seed=2)  # now holding its arrays: the limit is passed
    assert list(plugin.inputs) == [(small, 1, 1), (small, 2, 1)]  # the oldest dropped
    used(large)
    used(large)  # too large to keep with others: kept alone
    assert list(plugin.inputs) == [(large, 1, 1)]


def test_a_worker_adds_the_main_processs_folders_before_it_opens_a_backend(own_families):
    """Issue 41: the folders travel in the plugin (a remote worker gets them too), and a
    worker's backend has the family's variants though its process added none itself."""
    _opencl_or_skip()
    student = ROOT / "examples" / "assignment" / "student"
    plugin = DevicesPlugin("opencl", folders=(str(student),))
    try:
        assert "student_tiled" in plugin.backend("opencl").variants("mm")
        assert xbackend.families.added_folders() == (student.resolve(),)
    finally:
        plugin.teardown(None)


@pytest.mark.slow
def test_tune_on_a_cluster_caches_each_search_as_a_serial_tune_does(
    tmp_path, capsys, monkeypatch, own_families
):
    """tune --workers: the searches go to the worker holding the device, one at a time;
    every entry is cached, as a serial tune caches it (the same keys)."""
    _opencl_or_skip()
    from xbackend.tuning.cache import load_entries

    student = ROOT / "examples" / "assignment" / "student"
    argv = ["tune", "--backends", "opencl", "--kernels", str(student), "--variants",
            "student_tiled", "--sizes", "64x56x64,96x84x96", "--op", "mm,rmm", "--samples",
            "3", "--finalist-time", "0.3"]  # fmt: skip
    serial, spread = tmp_path / "serial.json", tmp_path / "spread.json"
    monkeypatch.setenv("XBACKEND_TUNE_CACHE", str(serial))
    main(argv)
    monkeypatch.setenv("XBACKEND_TUNE_CACHE", str(spread))
    main([*argv, "--workers", "1"])
    said = capsys.readouterr().out
    # rmm left out (the student's kernels compute mm alone); two sizes of one shape class
    assert "tuning opencl (" in said and "2 searches on worker w0" in said
    assert "student_tiled nothing to tune for rmm" in said.replace("has ", "")
    assert sorted(load_entries(spread)) == sorted(load_entries(serial))
    assert len(load_entries(spread)) == 1


@pytest.mark.slow
def test_a_worker_killed_while_it_tunes_ends_the_tune_with_the_reason(
    tmp_path, monkeypatch, own_families
):
    """A search whose worker dies is made again where another device holds its label;
    with none left, the tune ends (no wait for the dead worker) and says why."""
    _opencl_or_skip()
    from xbackend.cluster import TuneRequest
    from xbackend.sweep.sizes import parse_shapes

    monkeypatch.setenv("XBACKEND_TUNE_CACHE", str(tmp_path / "tuned.json"))
    xbackend.families.add_folders([ROOT / "examples" / "assignment" / "student"])
    request = TuneRequest(
        # 4096³: long enough on any device that the kill lands in the search (or in the
        # reference before it), never after it
        variants=("student_tiled",), sizes=tuple(parse_shapes("4096x4096x4096")), gpu_sizes=(),
        cpu_sizes=(), dtype="float32", ops=("mm",), seed=0, samples=20,
        finalist_time_s=30.0,
    )  # fmt: skip
    said: list[str] = []
    cluster = Cluster.start(ClusterSpec(workers=1), "opencl", say=said.append)
    try:
        (pid,) = cluster.client.run(os.getpid).values()
        (address,) = cluster.client.nthreads()
        finished: list[Any] = []
        run = threading.Thread(target=lambda: finished.append(cluster.tune(request, said.append)))
        run.start()
        _when(lambda: _busy(cluster, address))
        time.sleep(0.2)  # into the task
        os.kill(pid, signal.SIGKILL)
        run.join(timeout=60)
        assert finished, "the tune waited for its dead worker"
    finally:
        cluster.close()
    ((label, _, outcome),) = finished[0]
    assert label == "opencl" and isinstance(outcome, str), outcome
    assert "no live worker holds opencl any more" in outcome, outcome
    assert any("died: it is tuned again" in line for line in said), said


def _two_gpus() -> list[tuple[WorkerReport, Offer]]:
    """Two workers, a GPU each, of one model: the devices of the label cuda."""
    gpu0 = _worker("gpu0", _offer("cuda", "gpu", identity="pci:0"))
    gpu1 = _worker("gpu1", _offer("cuda", "gpu", identity="pci:1"))
    return [(gpu0, gpu0.offers[0]), (gpu1, gpu1.offers[0])]


def test_the_gpus_of_one_model_share_the_searches_and_the_cpu_tunes_after_them():
    gpu0 = _worker("gpu0", _offer("cuda", "gpu", identity="pci:0"))
    gpu1 = _worker("gpu1", _offer("cuda", "gpu", identity="pci:1"))
    cpu = _worker("cpu", _offer("cpu", "cpu"))
    searches = [TuneItem(v, "mm", Shape(64, 64, 64)) for v in ("warp", "vec4", "warp_db")]
    queue = TuneQueue(
        {"cuda": [(gpu0, gpu0.offers[0]), (gpu1, gpu1.offers[0])], "cpu": [(cpu, cpu.offers[0])]},
        {"cuda": searches, "cpu": searches[:1]},
    )

    def started() -> list[tuple[str, int, str]]:
        return [(label, index, worker.name) for label, index, _, worker, _ in queue.starts()]

    assert started() == [("cuda", 0, "gpu0"), ("cuda", 1, "gpu1")]  # both GPUs at once
    assert started() == []  # each GPU busy; the CPU waits for the host's GPU searches
    queue.finished("cuda", 1)
    assert started() == [("cuda", 2, "gpu1")]  # the first idle GPU takes the next
    queue.finished("cuda", 0)
    queue.finished("cuda", 2)
    assert started() == [("cpu", 0, "cpu")] and not queue.done
    queue.finished("cpu", 0)
    assert queue.done


def test_a_search_whose_worker_died_goes_to_another_device_or_is_dropped():
    holders = _two_gpus()
    first, second = (TuneItem(v, "mm", Shape(64, 64, 64), v) for v in ("warp", "vec4"))
    queue = TuneQueue({"cuda": holders}, {"cuda": [first, second]})
    assert [(i, w.name) for _, i, _, w, _ in queue.starts()] == [(0, "gpu0"), (1, "gpu1")]
    queue.finished("cuda", 0)  # gpu0 died under it
    queue.again("cuda", 0, first)
    assert queue.drop("tcp://gpu0") == []  # gpu1 still holds cuda
    queue.finished("cuda", 1)
    assert [(i, w.name) for _, i, _, w, _ in queue.starts()] == [(0, "gpu1")]
    queue.finished("cuda", 0)
    queue.again("cuda", 0, first)  # and gpu1 died too: nothing holds cuda any more
    assert queue.drop("tcp://gpu1") == [("cuda", 0, first)] and queue.done


def test_a_search_that_reads_an_earlier_one_s_entry_waits_for_it():
    """rmm's untuned trial reads mm's choice, a medium class the large one's: such a
    search starts once the earlier search it reads is back, as in the serial order."""
    holders = _two_gpus()
    mm, rmm, other = (
        TuneItem("warp_db", "mm", Shape(4096, 4096, 4096), "large"),
        TuneItem("warp_db", "rmm", Shape(4096, 4096, 4096), "large"),
        TuneItem("vec4", "mm", Shape(2048, 2048, 2048), "medium"),
    )
    queue = TuneQueue({"cuda": holders}, {"cuda": [mm, rmm, other]})
    assert [i for _, i, *_ in queue.starts()] == [0, 2]  # rmm waits for mm
    queue.finished("cuda", 0)
    assert [i for _, i, *_ in queue.starts()] == [1]
    medium = TuneItem("warp_db", "mm", Shape(2048, 2048, 2048), "medium")
    queue = TuneQueue({"cuda": holders}, {"cuda": [mm, medium]})
    assert [i for _, i, *_ in queue.starts()] == [0]  # each the other's fallback


def test_searches_of_one_cache_entry_run_in_the_serial_order():
    """Two sizes of one shape class write one entry: the later search starts once the
    earlier is back, whichever GPU is idle, so the entry is the serial tune's."""
    holders = _two_gpus()
    first, second, other = (
        TuneItem("warp", "mm", Shape(64, 64, 64), "small"),
        TuneItem("warp", "mm", Shape(96, 64, 96), "small"),
        TuneItem("warp", "mm", Shape(4096, 4096, 4096), "large"),
    )
    queue = TuneQueue({"cuda": holders}, {"cuda": [first, second, other]})
    assert [(i, w.name) for _, i, _, w, _ in queue.starts()] == [(0, "gpu0"), (2, "gpu1")]
    queue.finished("cuda", 2)
    assert queue.starts() == []  # gpu1 idle, but the entry's first search is not back
    queue.finished("cuda", 0)
    assert [(i, w.name) for _, i, _, w, _ in queue.starts()] == [(1, "gpu0")]


# -- the schedule's rules ----------------------------------------------------------------------


def _offer(label: str, kind: str, host: str = "h", identity: str = "") -> Offer:
    device = DeviceInfo(name=f"{kind} model", kind=kind)
    return Offer(label, label, label.partition(":")[0], device, {"mm": ["naive"]}, host,
                 identity or label)  # fmt: skip


def _worker(name: str, *offers: Offer) -> WorkerReport:
    return WorkerReport(f"tcp://{name}", name, offers[0].host, 1, offers)


def _lane(label: str, kind: str, order: int, step: int = 1) -> Lane:
    line = RemoteLine(label, label.partition(":")[0], f"{kind} model", "mm", "naive", None,
                      "float32")  # fmt: skip
    blank = line.record("run", Shape(8, 8, 8), step, 1)
    return Lane(line, order, step=step, due=(blank, None))


def _started(schedule: Schedule) -> list[tuple[str, str]]:
    return [(lane.line.label, slot.report.name) for lane, slot, _ in schedule.starts()]


def _done(schedule: Schedule, *lanes: Lane) -> None:
    for lane in lanes:
        schedule.finished(lane)
        lane.due = None


def test_the_gpus_run_at_once_and_the_cpu_alone_after_them():
    gpu0, gpu1, cpu = _lane("cuda:0", "gpu", 0), _lane("cuda:1", "gpu", 2), _lane("cpu", "cpu", 1)
    schedule = Schedule([gpu0, cpu, gpu1])
    schedule.add(_worker("gpu0", _offer("cuda:0", "gpu")))
    schedule.add(_worker("gpu1", _offer("cuda:1", "gpu")))
    schedule.add(_worker("cpu", _offer("cpu", "cpu")))
    assert _started(schedule) == [("cuda:0", "gpu0"), ("cuda:1", "gpu1")]
    _done(schedule, gpu0)
    assert _started(schedule) == []  # the host is still busy with the other GPU's point
    _done(schedule, gpu1)
    assert _started(schedule) == [("cpu", "cpu")]
    gpu0.due = _lane("cuda:0", "gpu", 0, step=2).due
    assert _started(schedule) == []  # the CPU's point runs alone on the host
    assert schedule.concurrency() == 2


def test_a_device_runs_one_point_and_a_line_stays_at_home_until_its_worker_dies():
    first, second = _lane("opencl", "gpu", 0), _lane("opencl", "gpu", 1)
    schedule = Schedule([first, second])
    schedule.add(_worker("w0", _offer("opencl", "gpu")))
    schedule.add(_worker("w1", _offer("opencl", "gpu")))  # the same device, twice
    assert _started(schedule) == [("opencl", "w0")]
    schedule.finished(first)
    first.step = 2
    assert _started(schedule) == [("opencl", "w1")]  # the waiting line, on the idle worker
    schedule.finished(second)
    second.due = None
    assert _started(schedule) == [("opencl", "w0")]  # the first line's home
    slot, lane = schedule.lost("tcp://w0")
    assert slot is not None and lane is first and first.deaths == 1 and first.home is None
    assert _started(schedule) == [("opencl", "w1")]


def test_gpus_of_one_model_share_the_serial_run_s_lines():
    """--gpus without --each-gpu: two GPUs of one model take the serial run's lines
    (label cuda), each line measured once, on one of them; two models each run the plan."""
    gpu0, gpu1 = (
        _offer("cuda:0", "gpu", identity="pci:0"),
        _offer("cuda:1", "gpu", identity="pci:1"),
    )
    cpu = _offer("cpu", "cpu")
    reports = shared_gpu_labels([_worker("gpu0", gpu0), _worker("gpu1", gpu1), _worker("cpu", cpu)])
    assert [[o.label for o in w.offers] for w in reports] == [["cuda"], ["cuda"], ["cpu"]]
    assert [[o.target for o in w.offers] for w in reports] == [["cuda:0"], ["cuda:1"], ["cpu"]]
    lanes = [_lane("cuda", "gpu", order) for order in range(4)]
    schedule = Schedule(lanes)
    for report in reports:
        schedule.add(report)
    assert _started(schedule) == [("cuda", "gpu0"), ("cuda", "gpu1")]  # both GPUs at once
    _done(schedule, lanes[0], lanes[1])
    assert _started(schedule) == [("cuda", "gpu0"), ("cuda", "gpu1")]  # two lines each
    other = dataclasses.replace(gpu1, device=DeviceInfo(name="another model", kind="gpu"))
    mixed = shared_gpu_labels([_worker("gpu0", gpu0), _worker("gpu1", other)])
    assert [w.offers[0].label for w in mixed] == ["cuda:gpu model", "cuda:another model"]


def test_a_restarted_gpu_worker_offers_the_lines_the_gpus_share():
    """Under --gpus, a worker a nanny restarted names its GPU's lines as the first
    workers' (cuda, not cuda:1), so the run's lines still go to it."""
    gpu0 = _offer("cuda:0", "gpu", identity="pci:0")
    gpu1 = _offer("cuda:1", "gpu", identity="pci:1")
    shared = Cluster(None, ClusterSpec(gpus="all"), "cuda", local=object())
    shared.reports = shared_gpu_labels([_worker("gpu0", gpu0), _worker("gpu1", gpu1)])
    restarted = shared.labelled(_worker("gpu1", gpu1))
    assert [o.label for o in restarted.offers] == ["cuda"]
    assert [o.target for o in restarted.offers] == ["cuda:1"]
    each = Cluster(None, ClusterSpec(gpus="all", each_gpu=True), "cuda", local=object())
    assert [o.label for o in each.labelled(_worker("gpu1", gpu1)).offers] == ["cuda:1"]


def test_alone_all_runs_one_point_per_host():
    lanes = [_lane("cuda:0", "gpu", 0), _lane("cuda:1", "gpu", 1)]
    schedule = Schedule(lanes, alone="all")
    schedule.add(_worker("gpu0", _offer("cuda:0", "gpu")))
    schedule.add(_worker("gpu1", _offer("cuda:1", "gpu")))
    assert _started(schedule) == [("cuda:0", "gpu0")]
    assert schedule.concurrency() == 1


def test_a_lane_no_worker_holds_is_an_orphan_after_the_grace():
    lane = _lane("cuda:0", "gpu", 0)
    schedule = Schedule([lane])
    schedule.add(_worker("cpu", _offer("cpu", "cpu")))
    assert schedule.orphans(100.0, 5.0, idle=False) == []
    assert schedule.orphans(104.0, 5.0, idle=False) == []
    assert schedule.orphans(105.0, 5.0, idle=False) == [lane]


class _NoWorkers:
    """A client whose workers are all gone."""

    def nthreads(self) -> dict[str, int]:
        return {}

    def cancel(self, futures: object) -> None:
        pass


def test_points_no_worker_can_take_are_recorded_lost_and_a_resume_measures_them(tmp_path):
    plan = Plan(shapes=[Shape(8, 8, 8), Shape(16, 16, 16)])
    line = _lane("cuda:0", "gpu", 0).line
    quiet = SweepDisplay("plain", log=lambda text: None)
    sweep: Sweep[RemoteLine] = Sweep(plan, "run", [line], {}, quiet)
    with ResultsWriter(tmp_path, RunHeader("run")) as writer:
        Driver(
            _NoWorkers(), Schedule([Lane(line, 0)]), sweep, writer, grace_s=0.0, poll_s=0.0
        ).run()
    points = _points(tmp_path)
    assert [(p.M, p.status, p.flags) for p in points] == [
        (8, "error", [WORKER_LOST]),
        (16, "error", [WORKER_LOST]),
    ]
    assert "no live worker holds cuda:0" in points[0].reason
    again: Sweep[RemoteLine] = Sweep(plan, "again", [line], {p.key: p for p in points}, quiet)
    assert again.prior(1, line) is not None and again.prior(2, line) is not None
    assert line not in again.failed  # a lost point is no failure of its line


def test_after_a_worker_died_under_a_batch_its_sizes_go_one_by_one(tmp_path):
    """Through the sizes of the batch a worker died under, a task is one point: a point
    that kills workers is then found, and recorded after MAX_DEATHS; after them, batches."""
    plan = Plan(shapes=[Shape(8 * i, 8 * i, 8 * i) for i in range(1, 9)])
    lane = _lane("cuda:0", "gpu", 0)
    quiet = SweepDisplay("plain", log=lambda text: None)
    sweep: Sweep[RemoteLine] = Sweep(plan, "run", [lane.line], {}, quiet)
    for shape in plan.shapes[:2]:  # two sizes measured: the cost model predicts
        sweep.learn(lane.line, int(2 * shape.M * shape.K * shape.N), 1e-5)
    with ResultsWriter(tmp_path, RunHeader("run")) as writer:
        driver = Driver(_NoWorkers(), Schedule([lane]), sweep, writer, batch_s=1e6)
        lane.step = 3
        lane.due = sweep.unrecorded(3, lane.line)
        assert [due[0].step for due in driver._batch(lane)] == [3, 4, 5, 6, 7, 8]
        lane.suspect_until = 6  # a worker died under sizes 3..6
        assert [due[0].step for due in driver._batch(lane)] == [3]
        lane.step, lane.due = 7, sweep.unrecorded(7, lane.line)
        assert [due[0].step for due in driver._batch(lane)] == [7, 8]


@pytest.mark.slow
def test_an_error_escaping_a_point_on_a_worker_is_that_point_s_record(tmp_path, monkeypatch):
    """An error outside measure_point's own handling (here: raised by it at the third
    size) is the third point's record: the first two keep theirs, the rest are skipped
    as after any failure, all in one batch."""
    monkeypatch.setattr(schedule_module, "BATCH_S", 1e9)
    plan = Plan(
        shapes=[Shape(8 * i, 7 * i, 8 * i) for i in range(1, 6)],
        variants=["naive"],
        sampling=Sampling(max_samples=3, min_samples=1),
    )

    def failing_at_24() -> None:  # run in the worker's process
        from xbackend.cluster import worker

        measure_point = worker.__dict__["measure_point"]

        def measure(plan: Any, config: Any, blank: Any, *args: Any) -> Any:
            if blank.M == 24:
                raise RuntimeError("a check that broke")
            return measure_point(plan, config, blank, *args)

        setattr(worker, "measure_point", measure)  # noqa: B010 - typed otherwise

    cluster = Cluster.start(ClusterSpec(workers=1), "cpu", say=lambda text: None)
    try:
        cluster.client.run(failing_at_24)
        cluster.run(plan, cluster.offered(), tmp_path, log=lambda text: None)
    finally:
        cluster.close()
    points = sorted(_points(tmp_path), key=lambda point: point.M)
    assert [(p.M, p.status) for p in points] == [
        (8, "ok"), (16, "ok"), (24, "error"), (32, "skipped"), (40, "skipped"),
    ]  # fmt: skip
    assert "RuntimeError: a check that broke" in points[2].reason
    assert points[3].reason.startswith("failed at a smaller size")


# -- the devices each worker holds, the lines, the records -------------------------------------


def _listing(name: str) -> list[DeviceInfo]:
    gpu, cpu = DeviceInfo("H200", kind="gpu"), DeviceInfo("EPYC", kind="cpu")
    return {"cuda": [gpu, gpu], "opencl": [cpu, gpu, gpu], "cpu": [cpu]}[name]


def test_local_workers_hold_one_gpu_each_or_the_devices_dealt_round_robin():
    cuda, opencl, cpu = Target("cuda"), Target("opencl"), Target("cpu")
    assert local_workers([cuda, cpu], "all", None, _listing) == {
        "gpu0": ["cuda:0"], "gpu1": ["cuda:1"], "cpu": ["cpu"],
    }  # fmt: skip
    assert local_workers([cuda, opencl], (1,), None, _listing) == {"gpu1": ["cuda:1", "opencl:2"]}
    assert local_workers([cpu, Target("cpu", "0")], None, 3, _listing) == {
        "w0": ["cpu"], "w1": ["cpu:0"], "w2": ["cpu"],
    }  # fmt: skip
    with pytest.raises(XBackendError, match="has 2 GPU"):
        local_workers([cuda], (2,), None, _listing)
    with pytest.raises(XBackendError, match="none of cpu has a GPU"):
        local_workers([cpu], "all", None, _listing)


def test_a_remote_line_keys_its_points_as_its_configuration_does():
    plan = Plan(shapes=[Shape(8, 7, 8)], variants=["naive", "tiled"], dtypes=["float32", "int32"])
    for config in configs(plan, [("cpu", CpuBackend())]):
        line = RemoteLine.of(config)
        here, there = (made.record("r", Shape(8, 7, 8), 1, 4) for made in (config, line))
        assert dataclasses.replace(here, timestamp="") == dataclasses.replace(there, timestamp="")
        assert line.title == config.title


def test_the_worker_and_the_cluster_are_recorded_and_old_files_still_read():
    due = _lane("cpu", "cpu", 0).due
    assert due is not None
    point = dataclasses.replace(due[0], worker="w1", host="node7")
    assert PointRecord.from_dict(json.loads(json.dumps(point.to_dict()))) == point
    serial = dataclasses.replace(point, worker="", host="")
    assert "worker" not in serial.to_dict() and PointRecord.from_dict(serial.to_dict()) == serial
    header = RunHeader("run", cluster={"workers": [{"name": "w0"}]})
    assert RunHeader.from_dict(header.to_dict()).cluster == header.cluster
    assert "cluster" not in RunHeader("run").to_dict()
    assert RunHeader.from_dict({"run_id": "old"}).cluster == {}
