"""Issue 30, round 3, the front: a full disk names the file it could not write, an
interrupt in the first seconds exits 130 in one line, and names from a results file are
printed as text, not obeyed by the terminal.

(Finding 4, the conformance suite against wrong backends, is tested where the plugin is:
``tests/test_plugin.py``.)
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from test_diff import points as diff_points
from test_diff import write as write_diff_run
from test_plots import run as plot_run

from xbackend import cli, safeio
from xbackend.backends.cpu import CpuBackend
from xbackend.sweep import runner
from xbackend.sweep.measure import measure_point

ROOT = Path(__file__).resolve().parent.parent
TINY = ["--backends", "cpu", "--variants", "naive", "--samples", "2"]
NO_SPACE = os.strerror(errno.ENOSPC)


def _results(folder: Path, records: list[Any]) -> Path:
    folder.mkdir()
    lines = [{"type": "run", "run_id": "r"}, *(p.to_dict() for p in records)]
    (folder / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return folder


def _error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.strip()]


# -- 10: a full disk names the path being written ----------------------------------------------


def _full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every write of data fails as on a full disk: with no file name, as the kernel says it."""

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, NO_SPACE)

    monkeypatch.setattr(os, "write", full)
    monkeypatch.setattr(os, "fsync", full)


def _commands(tmp_path: Path) -> dict[str, list[str]]:
    """Each command that writes, with the folder it writes into last."""
    ran = _results(tmp_path / "ran", plot_run(sizes=(16, 32)))
    a = write_diff_run(tmp_path / "a", diff_points(1))
    b = write_diff_run(tmp_path / "b", diff_points(2, run="rb"), run="rb")
    out = str(tmp_path / "out")
    return {
        "compare": ["compare", *TINY, "--sizes", "8x8", "--out", out],
        "limits": ["limits", *TINY[:4], "--start", "8", "--budget", "0.001", "--out", out],
        "plot": ["plot", str(ran), "--out", out],
        "report": ["report", str(ran), "--out", out],
        "diff": ["diff", str(a), str(b), "--out", out],
    }


@pytest.mark.slow
@pytest.mark.parametrize("command", ["compare", "limits", "plot", "report", "diff"])
def test_a_full_disk_names_the_file_it_could_not_write(tmp_path, monkeypatch, capsys, command):
    monkeypatch.setenv(runner.NO_CEILINGS_ENV, "1")
    argv = _commands(tmp_path)[command]
    _full_disk(monkeypatch)
    code = cli.main(argv)
    lines = _error_lines(capsys.readouterr().err)
    assert code == cli.EXIT_USAGE, lines
    assert len(lines) == 1, lines
    found = re.fullmatch(rf"xbackend: error: (.+): {NO_SPACE}", lines[0])
    assert found, lines
    named = Path(found.group(1))  # the file itself, not its temporary twin
    assert tmp_path / "out" in named.parents and not named.name.startswith("."), named
    assert not list((tmp_path / "out").rglob("*.tmp"))  # none left behind


def test_atomic_write_names_its_target_whichever_step_fails(tmp_path, monkeypatch):
    """A write, a flush or a rename that fails says which file, never a temporary name."""
    target = tmp_path / "figure.png"
    real_fdopen = os.fdopen

    class FullFile:
        def __init__(self, fd: int, mode: str) -> None:
            self._file = real_fdopen(fd, mode)

        def __enter__(self) -> FullFile:
            return self

        def __exit__(self, *exc: object) -> None:
            self._file.close()

        def write(self, data: bytes) -> int:
            raise OSError(errno.ENOSPC, NO_SPACE)

    monkeypatch.setattr(os, "fdopen", FullFile)
    with pytest.raises(OSError, match=NO_SPACE) as raised:
        safeio.atomic_write(target, b"\x89PNG data")
    assert raised.value.filename == str(target) and raised.value.errno == errno.ENOSPC
    monkeypatch.undo()

    def refused(source: object, destination: object) -> None:
        raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT), str(source), None, str(destination))

    monkeypatch.setattr(os, "replace", refused)
    with pytest.raises(OSError) as raised:
        safeio.atomic_write(target, "text")
    assert raised.value.filename == str(target) and raised.value.errno == errno.EDQUOT
    assert list(tmp_path.iterdir()) == []  # no temporary file left


# -- 13: an interrupt before the first point is recorded ---------------------------------------


def _interrupt(*args: object, **kwargs: object) -> None:
    raise KeyboardInterrupt


def _interrupted_compare(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    out = tmp_path / "run"
    code = cli.main(["compare", *TINY, "--sizes", "8x8,16x16", "--out", str(out)])
    lines = _error_lines(capsys.readouterr().err)
    assert code == cli.EXIT_INTERRUPTED, lines
    assert len(lines) == 1 and "nothing was recorded yet" in lines[0], lines
    assert "--resume" not in lines[0]
    assert not (out / "results.jsonl").exists()
    return lines


@pytest.mark.slow
@pytest.mark.parametrize(
    "where",
    ["opening the devices", "measuring the ceilings", "announcing the run", "the first point"],
)
def test_an_interrupt_before_the_first_point_exits_130_saying_nothing_was_recorded(
    tmp_path, monkeypatch, capsys, where
):
    from xbackend.cli import compare

    target = {
        "opening the devices": (compare, "get_backend"),
        "measuring the ceilings": (CpuBackend, "ceilings"),
        "announcing the run": (compare, "_announce"),
        "the first point": (runner, "measure_point"),
    }[where]
    with monkeypatch.context() as patched:
        patched.delenv(runner.NO_CEILINGS_ENV, raising=False)  # conftest sets it
        patched.setattr(*target, _interrupt)
        _interrupted_compare(tmp_path, capsys)
    # Nothing recorded: the same command runs into the same folder, without --resume.
    monkeypatch.setenv(runner.NO_CEILINGS_ENV, "1")
    out = tmp_path / "run"
    assert cli.main(["compare", *TINY, "--sizes", "8x8", "--no-plots", "--out", str(out)]) == 0


def test_an_interrupt_after_a_point_still_says_how_to_resume(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(runner.NO_CEILINGS_ENV, "1")
    calls = []

    def second_interrupts(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return measure_point(*args, **kwargs)

    monkeypatch.setattr(runner, "measure_point", second_interrupts)
    out = tmp_path / "run"
    code = cli.main(["compare", *TINY, "--sizes", "8x8,16x16", "--no-plots", "--out", str(out)])
    assert code == cli.EXIT_INTERRUPTED
    assert "--resume" in capsys.readouterr().err


# The command line as ``python -m xbackend`` runs it, after a line that says the package is
# imported: before it, and in the moment runpy takes to find ``xbackend.__main__``, a
# signal meets the interpreter's own start-up, where no code of xbackend runs yet.
_LAUNCH = (
    "import runpy, sys, xbackend; print('imported', flush=True); "
    "sys.argv[0] = 'xbackend'; runpy.run_module('xbackend', run_name='__main__')"
)
_SLOW_SWEEP = ["--backends", "cpu", "--variants", "naive", "--base", "24x21", "--steps", "12"]


@pytest.mark.slow
@pytest.mark.parametrize("delay_s", [0.05, 0.1, 0.2, 0.4, 1.0, 2.0])
def test_ctrl_c_in_the_first_seconds_exits_130_in_one_line(tmp_path, delay_s):
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    env.pop(runner.NO_CEILINGS_ENV, None)  # the ceilings are one of the first seconds' steps
    process = subprocess.Popen(
        [sys.executable, "-c", _LAUNCH, "compare", *_SLOW_SWEEP, "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    assert process.stdout is not None and process.stdout.readline() == "imported\n"
    time.sleep(delay_s)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    lines = _error_lines(err)
    assert process.returncode == cli.EXIT_INTERRUPTED, err
    assert "Traceback" not in err and len(lines) == 1, err
    recorded = (out / "results.jsonl").exists()
    assert ("--resume" in lines[0]) == recorded, (recorded, err)
    assert ("nothing was recorded yet" in lines[0]) == (not recorded), err


# -- 15: names from a results file are shown, not obeyed ---------------------------------------

ESC = "\x1b]0;owned\x07\x1b[2J"  # a window title, a bell and a cleared screen


def _hostile(tmp_path: Path) -> Path:
    records = [
        dataclasses.replace(p, device=f"dev{ESC}", variant=f"{p.variant}{ESC}")
        for p in plot_run(variants=("naive", "tiled"), sizes=(16, 32), labels=(f"cpu{ESC}",))
    ]
    skipped = dataclasses.replace(
        records[0], M=64, K=64, N=64, status="skipped", reason=f"too big{ESC}",
        kernel_s=None, end_to_end_s=None,
    )  # fmt: skip
    return _results(tmp_path / "hostile", [*records, skipped])


def _shown_not_obeyed(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text, repr(text)


@pytest.mark.slow
def test_plot_prints_control_characters_from_the_results_as_escapes(tmp_path, capsys):
    assert cli.main(["plot", str(_hostile(tmp_path)), "--out", str(tmp_path / "out")]) == 0
    captured = capsys.readouterr()
    _shown_not_obeyed(captured.out + captured.err)
    assert "cpu\\x1b]0;owned\\x07" in captured.out and "too big\\x1b" in captured.out


@pytest.mark.parametrize("command", ["plot", "report"])
def test_a_filter_error_shows_the_values_present_as_escapes(tmp_path, capsys, command):
    argv = [command, "--backends", "cuda", str(_hostile(tmp_path)), "--out", str(tmp_path / "o")]
    assert cli.main(argv) == cli.EXIT_USAGE
    captured = capsys.readouterr()
    _shown_not_obeyed(captured.out + captured.err)
    assert "present: cpu\\x1b" in captured.err
