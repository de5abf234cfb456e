"""Nothing lost, nothing written where it should not be: the results folder under faults.

Each test here reproduces a finding of an adversarial review of the results files,
``--resume``, concurrent runs and the command line's handling of bad paths and values.
"""

from __future__ import annotations

import csv
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import xbackend_here

from xbackend import results
from xbackend.results import FolderBusy, PointRecord, ResultsWriter, RunLock

ROOT = Path(__file__).resolve().parent.parent
SMALL = ["--backends", "cpu", "--variants", "naive,tiled", "--samples", "2", "--no-plots"]


def _env() -> dict[str, str]:
    path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path), "PYTHONUNBUFFERED": "1"}


def xb(*args: str) -> subprocess.CompletedProcess[str]:
    """The command in this process: what these tests check is what it writes and says.
    Runs started together, a closed stdout and a file size limit are processes' own."""
    return xbackend_here(*args)


def _jsonl_points(out: Path) -> list[dict[str, Any]]:
    lines = (out / "results.jsonl").read_text().splitlines()
    return [item for item in map(json.loads, lines) if item["type"] == "point"]


def _csv_rows(out: Path) -> list[dict[str, str]]:
    with (out / "results.csv").open(newline="") as file:
        return list(csv.DictReader(file))


def _same_points(out: Path) -> None:
    """The CSV holds exactly the points of the JSONL, in order."""
    rows = _csv_rows(out)
    points = _jsonl_points(out)
    assert [(r["variant"], r["M"], r["status"]) for r in rows] == [
        (p["variant"], str(p["M"]), p["status"]) for p in points
    ]


def _one_line_error(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().startswith("xbackend: error:") or "error:" in done.stderr
    for word in words:
        assert word in done.stderr, done.stderr


def _record(M: int, status: str = "skipped", reason: str = "") -> PointRecord:
    return PointRecord(
        run_id="r",
        backend="cpu",
        label="cpu",
        device="d",
        variant="naive",
        tile=None,
        dtype="float32",
        M=M,
        K=M,
        N=M,
        flops=2 * M**3,
        status=status,
        reason=reason,
    )


# -- 1, 2: the CSV always ends up holding every point of the JSONL -------------------------


@pytest.mark.slow
def test_a_row_lost_from_the_csv_comes_back_on_resume(tmp_path):
    out = tmp_path / "run"
    assert xb("compare", *SMALL, "--sizes", "8x8,12x12", "--out", str(out)).returncode == 0
    text = (out / "results.csv").read_text().splitlines(keepends=True)
    (out / "results.csv").write_text("".join(text[:-1]))  # a kill between the two writes
    done = xb("compare", *SMALL, "--sizes", "8x8,12x12", "--out", str(out), "--resume")
    assert done.returncode == 0, done.stderr
    assert len(_csv_rows(out)) == 4
    _same_points(out)


def test_a_torn_multi_line_csv_record_does_not_swallow_later_rows(tmp_path):
    with ResultsWriter(tmp_path) as writer:
        writer.append(_record(1))
        writer.append(_record(2, "error", "CompileError: build failed\nline 1: x\nline 2: y"))
    csv_path = tmp_path / "results.csv"
    text = csv_path.read_text()
    csv_path.write_text(text[: text.index("line 1: x") + 4])  # cut inside the quoted field
    with ResultsWriter(tmp_path) as writer:
        writer.append(_record(3))
    _same_points(tmp_path)
    assert [row["M"] for row in _csv_rows(tmp_path)] == ["1", "2", "3"]
    assert _csv_rows(tmp_path)[1]["reason"].endswith("line 2: y")


# -- 3: resume finds the points of tuned variants -------------------------------------------


@pytest.mark.slow
def test_resume_does_not_measure_a_tuned_variant_again(tmp_path):
    out = tmp_path / "run"
    args = ["compare", "--backends", "opencl", "--variants", "vec4,naive", "--sizes", "16x16"]
    first = xb(*args, "--samples", "2", "--no-plots", "--out", str(out))
    assert first.returncode == 0, first.stderr
    assert first.stdout.count("code equality: True") == 2
    again = xb(*args, "--samples", "2", "--no-plots", "--out", str(out), "--resume")
    assert again.returncode == 0, again.stderr
    assert "code equality: True" not in again.stdout.split("backend ")[0]  # nothing measured
    assert len(_jsonl_points(out)) == 2
    assert len((out / "results.jsonl").read_text().splitlines()) == 3  # no second run header


# -- 4: one run per folder ---------------------------------------------------------------------


def test_a_folder_is_taken_by_one_run_at_a_time(tmp_path):
    with RunLock(tmp_path), pytest.raises(FolderBusy, match="in use by another xbackend run"):
        RunLock(tmp_path)
    RunLock(tmp_path).release()  # free again once released


@pytest.mark.slow
def test_runs_started_together_into_one_folder(tmp_path):
    # Opening OpenCL takes a while: the window between looking at the folder and
    # writing to it that a check without a lock leaves open.
    for attempt in range(3):
        out = tmp_path / f"run{attempt}"
        command = [sys.executable, "-m", "xbackend", "compare", "--backends", "cpu,opencl"]
        command += ["--variants", "naive", "--samples", "2", "--no-plots"]
        command += ["--sizes", "8x8,16x16", "--out", str(out)]
        started = [
            subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
            for _ in range(3)
        ]
        outcomes: list[tuple[int, str]] = []
        for p in started:
            code = p.wait(timeout=300)
            assert p.stderr is not None
            outcomes.append((code, p.stderr.read().decode()))
        codes = sorted(code for code, _ in outcomes)
        assert codes == [0, 2, 2], outcomes
        for code, stderr in outcomes:
            if code == 2:
                assert "in use by another xbackend run" in stderr or "already holds" in stderr
                assert "Traceback" not in stderr
        assert len(_jsonl_points(out)) == 4  # each point once
        _same_points(out)


# -- 8: a point that cannot fit is recorded, and the sweep goes on ----------------------------


def test_a_size_that_cannot_fit_is_recorded_and_the_sweep_goes_on(tmp_path):
    out = tmp_path / "run"
    start = time.perf_counter()
    done = xb(
        "compare", "--backends", "cpu", "--variants", "tiled", "--samples", "2", "--no-plots",
        "--sizes", "8x8,400000x400000,16x16", "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert time.perf_counter() - start < 120
    points = _jsonl_points(out)
    assert [(p["M"], p["status"]) for p in points] == [
        (8, "ok"),
        (400000, "skipped"),
        (16, "ok"),
    ]
    assert "GiB" in points[1]["reason"]


# -- 9: a reader that goes away ---------------------------------------------------------------


@pytest.mark.slow
def test_a_closed_stdout_ends_the_sweep_quietly_and_resume_finishes(tmp_path):
    out = tmp_path / "run"
    sizes = ["--sizes", ",".join(f"{8 * i}x{8 * i}" for i in range(1, 13))]
    process = subprocess.Popen(
        [sys.executable, "-m", "xbackend", "compare", *SMALL, *sizes, "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    assert process.stdout is not None and process.stderr is not None
    for _ in range(3):  # what `| head -3` reads
        process.stdout.readline()
    process.stdout.close()
    code = process.wait(timeout=300)
    stderr = process.stderr.read().decode()
    assert "Traceback" not in stderr, stderr
    assert code in (0, 141)
    _same_points(out)
    done = xb("compare", *SMALL, *sizes, "--out", str(out), "--resume")
    assert done.returncode == 0, done.stderr
    keys = [p.key for p in results.load([out]).points]
    assert len(keys) == len(set(keys)) == 24
    _same_points(out)


# -- 10: paths that cannot be written, files that are not results -----------------------------


@pytest.mark.slow
@pytest.mark.parametrize("where", ["file", "under-file", "devnull"])
def test_an_out_that_cannot_be_a_folder_is_one_line(tmp_path, where):
    (tmp_path / "file").write_text("x")
    out = {
        "file": tmp_path / "file",
        "under-file": tmp_path / "file" / "run",
        "devnull": Path("/dev/null"),
    }[where]
    _one_line_error(xb("compare", *SMALL, "--sizes", "8x8", "--out", str(out)), "folder")


@pytest.mark.slow
def test_a_file_size_limit_is_one_line(tmp_path):
    out = tmp_path / "run"

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (3000, 3000))

    done = subprocess.run(
        [sys.executable, "-m", "xbackend", "compare", *SMALL, "--steps", "4", "--out", str(out)],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=300,
        preexec_fn=limit,
    )
    _one_line_error(done, "results.")
    for point in results.load([out]).points:  # what was written still reads
        assert point.status in results.STATUSES


@pytest.mark.slow
def test_plot_and_report_refuse_an_out_that_is_a_file(tmp_path):
    out = tmp_path / "run"
    assert xb("compare", *SMALL, "--sizes", "8x8", "--out", str(out)).returncode == 0
    (tmp_path / "file").write_text("x")
    for command in ("plot", "report"):
        _one_line_error(xb(command, str(out), "--out", str(tmp_path / "file")), "folder")


@pytest.mark.slow
def test_results_that_are_a_folder_or_a_device_are_one_line(tmp_path):
    (tmp_path / "results.jsonl").mkdir()
    _one_line_error(xb("plot", str(tmp_path)), "not a results file")
    start = time.perf_counter()
    _one_line_error(xb("plot", "/dev/urandom"), "not a results file")
    assert time.perf_counter() - start < 60


def test_undecodable_bytes_name_the_file_and_line_and_a_torn_tail_is_dropped(tmp_path):
    with ResultsWriter(tmp_path) as writer:
        writer.append(_record(1))
        writer.append(_record(2))
    path = tmp_path / "results.jsonl"
    good = path.read_bytes()
    path.write_bytes(good + b'{"type": "point", "M": \xff\xfe')  # a torn, undecodable tail
    assert [p.M for p in results.load([tmp_path]).points] == [1, 2]
    lines = good.splitlines(keepends=True)
    path.write_bytes(lines[0] + b"\xff\xfe garbage\n" + b"".join(lines[1:]))
    with pytest.raises(results.ResultsError, match=r"results\.jsonl:2: .*not a JSON line"):
        results.load([tmp_path])


# -- 11: lines that are JSON but not results ----------------------------------------------------

_GOOD = {
    "type": "point", "run_id": "r", "backend": "cpu", "label": "cpu", "device": "d",
    "variant": "naive", "tile": None, "dtype": "float32", "M": 8, "K": 8, "N": 8,
    "flops": 1024, "status": "ok", "op": "mm", "batch": 1, "reason": "", "equal": True,
    "max_abs_error": 0.0, "bound_ratio": 0.0, "gflops": 1.0,
    "kernel_s": {"n": 1, "median": 1e-6, "q1": 1e-6, "q3": 1e-6, "min": 1e-6, "max": 1e-6,
                 "mean": 1e-6},
    "end_to_end_s": {"n": 1, "median": 2e-6, "q1": 2e-6, "q3": 2e-6, "min": 2e-6,
                     "max": 2e-6, "mean": 2e-6},
}  # fmt: skip

HOSTILE = {
    "only a type": ({"type": "point"}, "field"),
    "a list": ([1, 2, 3], "not a JSON object"),
    "no status": ({k: v for k, v in _GOOD.items() if k != "status"}, "'status'"),
    "M a string": ({**_GOOD, "M": "abc"}, "'M'"),
    "M a huge float": ({**_GOOD, "M": 1e300}, "'M'"),
    "tile a string": ({**_GOOD, "tile": "abc"}, "'tile'"),
    "kernel_s null": ({**_GOOD, "kernel_s": None}, "'kernel_s'"),
    "bound_ratio a string": ({**_GOOD, "bound_ratio": "x"}, "'bound_ratio'"),
}


def _folder_with(tmp_path: Path, item: object) -> Path:
    folder = tmp_path / "run"
    folder.mkdir()
    lines = [json.dumps(_GOOD), json.dumps(item), json.dumps({**_GOOD, "M": 16})]
    (folder / "results.jsonl").write_text("\n".join(lines) + "\n")
    return folder


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_wrong_line_is_named_and_plot_skips_it(tmp_path, name):
    item, field = HOSTILE[name]
    folder = _folder_with(tmp_path, item)
    with pytest.raises(results.ResultsError, match=rf"results\.jsonl:2: .*{field}"):
        results.load([folder])
    warnings: list[str] = []
    _, points = results.load([folder], warn=warnings.append)
    assert [p.M for p in points] == [8, 16]
    assert len(warnings) == 1 and "results.jsonl:2:" in warnings[0]


@pytest.mark.slow
def test_resume_and_plot_of_a_wrong_line_are_one_line(tmp_path):
    folder = _folder_with(tmp_path, {**_GOOD, "M": "abc"})
    done = xb("compare", *SMALL, "--sizes", "8x8", "--out", str(folder), "--resume")
    _one_line_error(done, "results.jsonl:2", "'M'")
    plotted = xb("plot", str(folder))
    assert plotted.returncode == 0, plotted.stderr
    assert "Traceback" not in plotted.stderr
    assert "results.jsonl:2" in plotted.stderr and "skipped" in plotted.stderr


# -- 13: values the command line must refuse -----------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, words",
    [
        (["compare", "--seed", "-1"], ["--seed"]),
        (["compare", "--steps", "99999999"], ["--steps"]),
        (["compare", "--op", "bmm", "--batch", "100000000"], ["--batch"]),
        (["compare", "--warmup", "1000000000"], ["--warmup"]),
        (["compare", "--variants", ""], ["--variants"]),
        (["compare", "--timeout", "inf"], ["--timeout"]),
        (["compare", "--backends", "cpu,cpu", "--sizes", "8x8"], ["twice"]),
        (["tune", "--backend", "cpu,opencl"], ["one backend"]),
    ],
)
def test_bad_values_are_usage_errors(tmp_path, args, words):
    start = time.perf_counter()
    done = xb(*args, "--out", str(tmp_path / "run")) if args[0] == "compare" else xb(*args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    for word in words:
        assert word in done.stderr
    assert time.perf_counter() - start < 60
    assert not (tmp_path / "run" / "results.jsonl").exists()


# -- 14: a resume must not mix other inputs, and retries what the budget skipped ----------------


@pytest.mark.slow
def test_resume_with_another_seed_is_refused(tmp_path):
    out = tmp_path / "run"
    assert xb("compare", *SMALL, "--sizes", "8x8", "--out", str(out)).returncode == 0
    done = xb("compare", *SMALL, "--sizes", "8x8,16x16", "--out", str(out), "--resume",
              "--seed", "7")  # fmt: skip
    _one_line_error(done, "seed")
    assert len(_jsonl_points(out)) == 2


@pytest.mark.slow
def test_resume_with_a_larger_budget_measures_what_the_budget_skipped(tmp_path):
    out = tmp_path / "run"
    sizes = ["--sizes", "8x8,64x64,96x96", "--variants", "naive"]
    base = ["compare", "--backends", "cpu", "--samples", "3", "--no-plots", *sizes]
    first = xb(*base, "--budget", "0.0001", "--out", str(out))
    assert first.returncode == 0, first.stderr
    skipped = [p for p in _jsonl_points(out) if p["status"] == "skipped"]
    assert skipped and all("budget" in p["reason"] for p in skipped)
    again = xb(*base, "--budget", "0.0001", "--out", str(out), "--resume")
    assert again.returncode == 0 and len(_jsonl_points(out)) == 3  # same budget: as it was
    done = xb(*base, "--budget", "60", "--out", str(out), "--resume")
    assert done.returncode == 0, done.stderr
    latest = results.latest(results.load([out]).points)
    assert [p.status for p in latest] == ["ok", "ok", "ok"]
    _same_points(out)


# -- 16: links are not written through ----------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", ["results.csv", "results.jsonl"])
def test_resume_refuses_a_linked_results_file(tmp_path, name):
    out = tmp_path / "run"
    assert xb("compare", *SMALL, "--sizes", "8x8", "--out", str(out)).returncode == 0
    target = tmp_path / "precious.txt"
    target.write_text("line one\nline two, no newline")
    os.replace(out / name, tmp_path / "moved")
    (out / name).symlink_to(target)
    done = xb("compare", *SMALL, "--sizes", "8x8,16x16", "--out", str(out), "--resume")
    _one_line_error(done, "symbolic link")
    assert target.read_text() == "line one\nline two, no newline"


# -- 10: Ctrl-C while the figures are drawn -----------------------------------------------------


def test_ctrl_c_while_drawing_keeps_the_results_and_says_how_to_draw_again(
    tmp_path, monkeypatch, capsys
):
    from xbackend import cli

    def interrupted(points, folder, roofs=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.compare, "draw", interrupted)
    out = tmp_path / "run"
    code = cli.main(["compare", "--backends", "cpu", "--variants", "naive", "--samples", "2",
                     "--sizes", "8x8,16x16", "--out", str(out)])  # fmt: skip
    assert code == cli.EXIT_INTERRUPTED
    assert "xbackend report" in capsys.readouterr().err
    assert len(_jsonl_points(out)) == 2
    _same_points(out)


@pytest.mark.slow
def test_a_refused_run_leaves_no_folder(tmp_path):
    out = tmp_path / "run"
    done = xb("compare", "--backends", "cpu", "--variants", "nosuch", "--sizes", "8x8",
              "--out", str(out))  # fmt: skip
    _one_line_error(done, "nosuch")
    assert not out.exists()
