"""Issue 38 ("Reliability round 4"), the results' side: every good line of a results file
is read however many bad lines it holds (3), Ctrl-C while ``python -m xbackend`` imports
is one line and exit 130 (16), and text from the machine or the records is shown, never
obeyed, in the figures' warnings and the report (20)."""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import xbackend_here
from matplotlib.text import Text
from test_diff import SIZES, VARIANTS, record, write

from xbackend.cli import main
from xbackend.results import load
from xbackend.safeio import printable

ROOT = Path(__file__).resolve().parent.parent

# The kinds of bad line a damaged file holds: not JSON, not an object, a bad field.
BAD_LINES = ["not json", "[1, 2]", '{"type": "point", "M": "abc"}', '{"type": "elsewhere"}']


def _points(seed: int, *, run: str, slow_from: int | None = None) -> list[Any]:
    """Every variant at every size of one label; from point ``slow_from`` on, 10x slower."""
    rng = np.random.default_rng(seed)
    made = []
    for index, (variant, n) in enumerate((v, n) for n in SIZES for v in VARIANTS):
        slow = slow_from is not None and index >= slow_from
        made.append(record(rng, variant, n, run=run, scale=10.0 if slow else 1.0))
    return made


def _spoil(folder: Path, count: int, seed: int, *, before: int) -> list[int]:
    """``count`` bad lines put among the first ``before`` lines of the folder's file, at
    seeded places; their line numbers (1-based) in the file as written."""
    jsonl = folder / "results.jsonl"
    lines = jsonl.read_text().splitlines()
    rng = np.random.default_rng(seed)
    for _ in range(count):
        place = int(rng.integers(1, before + 1))  # never before the run header
        lines.insert(place, BAD_LINES[int(rng.integers(len(BAD_LINES)))])
        before += 1
    jsonl.write_text("\n".join(lines) + "\n")
    return [number for number, line in enumerate(lines, 1) if line in BAD_LINES]


# -- 3: a file's bad lines never hide its good ones ---------------------------------------------


@pytest.mark.parametrize(("count", "seed"), [(10, 1), (11, 2), (25, 3), (60, 4)])
def test_every_good_line_is_read_however_many_bad_lines(tmp_path, count, seed):
    """Before: after the 10th bad line the rest of the file was skipped, good lines too."""
    good = _points(seed, run="ra")
    folder = write(tmp_path / "run", good)
    numbers = _spoil(folder, count, seed, before=3)
    told: list[str] = []
    loaded = load([folder], warn=told.append)
    read = [(p.key, p.kernel_samples_s, p.host) for p in loaded.points]
    assert read == [(p.key, p.kernel_samples_s, "testhost") for p in good]
    assert len(told) <= 4  # the first three by line, then one with the count
    jsonl = folder / "results.jsonl"
    for number in numbers[:3]:
        assert any(f"{jsonl}:{number}:" in message for message in told)
    if count > 3:
        assert f"{count} bad lines" in told[-1]
        assert f"lines {', '.join(map(str, numbers[:5]))}" in told[-1]


@pytest.mark.parametrize(("count", "seed"), [(11, 5), (30, 6)])
def test_diff_fails_on_a_slower_second_half_behind_bad_lines(tmp_path, capsys, count, seed):
    """The issue's example: B's later half 10x slower, behind 11 or more bad lines, passed
    ``--fail-on slower`` (exit 0)."""
    half = len(SIZES) * len(VARIANTS) // 2
    a = write(tmp_path / "a", _points(seed, run="ra"))
    b = write(tmp_path / "b", _points(seed + 100, run="rb", slow_from=half), run="rb")
    _spoil(b, count, seed, before=half)
    out = tmp_path / "out"
    argv = ["diff", str(a), str(b), "--out", str(out), "--no-plots", "--floors", "none"]
    code = main([*argv, "--fail-on", "slower"])
    printed = capsys.readouterr()
    assert code == 1
    assert printed.out.count("SLOWER") >= len(SIZES) * len(VARIANTS) - half
    assert f"{count} bad lines" in printed.err
    assert "rest of the file is skipped" not in printed.err


@pytest.mark.slow
@pytest.mark.parametrize("command", ["plot", "report"])
def test_plot_and_report_draw_the_points_behind_many_bad_lines(tmp_path, capsys, command):
    folder = write(tmp_path / "run", _points(7, run="ra"))
    _spoil(folder, 14, 7, before=2)  # the last size's points all come after them
    out = tmp_path / "out"
    assert main([command, str(folder), "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert "14 bad lines" in printed.err
    assert printed.err.count("xbackend: warning:") == 4
    if command == "report":
        assert f"| {SIZES[-1]} |" in (out / "report.md").read_text()
    else:
        assert str(SIZES[-1]) in printed.out.split("figures:")[0]


# -- 16: Ctrl-C while the command line imports ----------------------------------------------

# Put first on the path of the command the test starts: the process sends itself SIGINT as
# it starts importing the module named in XBACKEND_TEST_INTERRUPT_AT, deterministically
# inside the window a person's Ctrl-C falls in (the first 0.1-0.6 s).
_SITECUSTOMIZE = """
import importlib.abc, os, signal, sys

class _InterruptAt(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == os.environ.get("XBACKEND_TEST_INTERRUPT_AT"):
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, _InterruptAt())
"""

# In order of import: the package's own (xbackend/__init__.py, before any handler of the
# command's could run), then the command line's, then a command's module.
INTERRUPT_AT = [
    "numpy",
    "xbackend.operations",
    "xbackend.backends.registry",
    "xbackend.errors",
    "xbackend.cli",
    "xbackend.cli.exits",
    "xbackend.cli.compare",
    "xbackend.backends.cpu",
]


def _started(how: str) -> list[str]:
    if how == "module":
        return [sys.executable, "-m", "xbackend"]
    script = Path(sys.executable).with_name("xbackend")
    if not script.is_file():
        pytest.skip(f"no xbackend script beside {sys.executable}")
    return [sys.executable, str(script)]


@pytest.mark.parametrize("how", ["module", "script"])
@pytest.mark.parametrize("module", INTERRUPT_AT)
def test_ctrl_c_while_the_command_line_imports_is_one_line(tmp_path, how, module):
    """Before: a KeyboardInterrupt traceback from the package's imports (``python -m``
    imports ``xbackend/__init__.py`` before ``__main__.py`` runs)."""
    (tmp_path / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    path = [str(tmp_path), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path), "XBACKEND_TEST_INTERRUPT_AT": module}
    out = tmp_path / "run"
    argv = [*_started(how), "compare", "--backends", "cpu", "--sizes", "8x8", "--out", str(out)]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 130, done.stderr
    assert lines == ["xbackend: interrupted: nothing was recorded yet"], done.stderr
    assert not out.exists()


def test_the_command_lines_handler_is_not_an_api_users(tmp_path):
    """Imported by a program of its own, xbackend leaves Ctrl-C as Python has it."""
    code = (
        "import signal, xbackend; "
        "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    )
    for argv in ([sys.executable, "-c", code], [sys.executable, str(tmp_path / "x.py")]):
        (tmp_path / "x.py").write_text(code)
        done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert done.stdout.strip() == "True", done.stderr


# -- 20: control characters from the machine or the records, shown and never obeyed ----------

# C0 and C1 controls, DEL and a bidirectional override: each would be obeyed by a terminal
# (or turn the text around) if written raw.
CONTROLS = ["\x1b[2J", "\x1b]0;owned\x07", "\x9b31m", "\x7f", "\x08\x08", "\u202e", "\x00"]


def _controlled(tmp_path: Path, seed: int) -> tuple[Path, str, str]:
    """A results folder whose device name and recorded OPENBLAS_THREAD_TIMEOUT hold seeded
    control characters; the two strings."""
    rng = np.random.default_rng(seed)
    picks = [CONTROLS[int(i)] for i in rng.permutation(len(CONTROLS))[:3]]
    device = f"GPU{picks[0]}X{picks[1]}"
    timeout = f"4{picks[2]}"
    points = [record(rng, v, n, device=device) for v in VARIANTS for n in SIZES]
    folder = write(tmp_path / "run", points, devices={"cpu": {"name": device, "platform": "x"}})
    jsonl = folder / "results.jsonl"
    lines = jsonl.read_text().splitlines()
    header = json.loads(lines[0])
    header["environment"]["settings"] = {"OPENBLAS_THREAD_TIMEOUT": timeout}
    jsonl.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    return folder, device, timeout


def _raw_controls(text: str) -> list[str]:
    return sorted({c for c in text if not c.isprintable() and c != "\n"})


@pytest.mark.slow
@pytest.mark.parametrize("seed", [20, 21, 22])
def test_control_characters_reach_neither_the_terminal_nor_the_report(tmp_path, seed):
    """Before: matplotlib's "Glyph 27 missing" warning printed a device name's raw bytes
    from ``plot`` and ``report``, and the ESC of a recorded setting went raw into
    report.md and report.html."""
    folder, _, timeout = _controlled(tmp_path, seed)
    for command in ("plot", "report"):  # in this process: its stdout, stderr and warnings
        out = tmp_path / command
        done = xbackend_here(command, str(folder), "--out", str(out))
        assert done.returncode == 0, done.stderr
        assert "Glyph" not in done.stderr, done.stderr
        assert _raw_controls(done.stdout + done.stderr) == [], done.stderr
    for name in ("report.md", "report.html"):
        written = (tmp_path / "report" / name).read_text()
        assert _raw_controls(written) == [], name
        assert "OPENBLAS" in written
    page = (tmp_path / "report" / "report.html").read_text()
    assert f"OPENBLAS_THREAD_TIMEOUT={html.escape(printable(timeout))}" in page


@pytest.mark.parametrize("text", CONTROLS)
def test_a_figure_shows_a_control_character_as_its_escape(tmp_path, text):
    """Every text of a figure, whichever way it came (a legend, a title, a tick), is drawn
    without a raw control character; a figure's own line breaks stay."""
    import warnings

    from matplotlib.figure import Figure

    from xbackend.figures.plots import save

    figure = Figure()
    axes = figure.add_subplot()
    axes.plot([1, 2], [1, 2], label=f"cpu{text}")
    axes.set_title(f"line one\nGPU{text}")
    axes.set_xticks([1, 2], [f"a{text}", "b"])
    axes.legend()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a missing glyph is a warning
        save(figure, tmp_path, "figure")
    texts = [t.get_text() for t in figure.findobj(Text) if isinstance(t, Text)]
    assert all(_raw_controls(t) == [] for t in texts)
    assert "line one\nGPU" in axes.get_title()
