"""``xbackend diff`` under issue 30 ("Reliability round 3"): impossible times are bad lines,
nothing compared is an exit status of its own, two hosts of one run are compared apart, a
run of many points (or a point of many samples) costs what a reader can use, and the
file's control characters are shown, never obeyed, on the terminal."""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.patches import Rectangle
from test_diff import SIZES, VARIANTS, points, record, write

from xbackend.analysis import diff
from xbackend.cli import main
from xbackend.figures.ratios import MOST_POINTS, ratio_figure
from xbackend.results import PointKey, PointRecord, ResultsError, RunHeader, load
from xbackend.results.reading import printable

ROOT = Path(__file__).resolve().parent.parent


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (path / "results.jsonl").read_text().splitlines()]


def _rewrite(path: Path, lines: list[dict[str, Any]]) -> None:
    (path / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def _pair(tmp_path: Path, labels: tuple[str, ...] = ("cpu",)) -> tuple[Path, Path]:
    a = write(tmp_path / "a", points(1, labels=labels))
    b = write(tmp_path / "b", points(2, run="rb", labels=labels), run="rb")
    return a, b


# -- 1: a time of 0 or less, or not finite, is a bad line ----------------------------------------

IMPOSSIBLE = [0.0, -0.0, -1e-3, math.nan, math.inf]


@pytest.mark.slow
@pytest.mark.parametrize("bad", IMPOSSIBLE, ids=repr)
@pytest.mark.parametrize("field", ["kernel_samples_s", "end_to_end_samples_s", "kernel_s"])
def test_an_impossible_time_is_a_bad_line_that_diff_skips(tmp_path, capsys, bad, field):
    """Before: B's samples of 0, -0.0 or below were taken, and the point called FASTER."""
    a, b = _pair(tmp_path)
    lines = _lines(b)
    victim = lines[1]  # line 2: the first point (the header is line 1)
    if field == "kernel_s":
        victim["kernel_s"] = {**victim["kernel_s"], "median": bad, "min": bad}
    else:
        victim[field] = [bad] * len(victim[field])
    _rewrite(b, lines)
    with pytest.raises(ResultsError, match=rf"results.jsonl:2: field '{field}"):
        load([b])
    code = main(["diff", str(a), str(b), "--out", str(tmp_path / "out"), "--fail-on", "changed"])
    printed = capsys.readouterr()
    assert f"{b / 'results.jsonl'}:2: field '{field}" in printed.err
    assert "is not a time in seconds" in printed.err and "line skipped" in printed.err
    assert "FASTER" not in printed.out
    assert "1 only in A" in printed.out  # the skipped point is B's no more
    assert code == 0


def test_points_without_times_still_read(tmp_path):
    """Skipped, failed and profiled points have no samples (or a stub of statistics):
    they are not impossible times, and read as before."""
    rng = np.random.default_rng(11)
    measured = record(rng, "tiled", 64)
    skipped = PointRecord(**{**measured.__dict__, "status": "skipped", "reason": "too large",
                             "kernel_s": {"median": 0.0}, "end_to_end_s": None,
                             "kernel_samples_s": [], "end_to_end_samples_s": []})  # fmt: skip
    failed = PointRecord(**{**measured.__dict__, "M": 128, "status": "error", "reason": "boom",
                            "kernel_s": None, "end_to_end_s": None, "kernel_samples_s": [],
                            "end_to_end_samples_s": []})  # fmt: skip
    profiled = PointRecord(**{**measured.__dict__, "M": 256, "clock": "nsight-compute",
                              "end_to_end_s": None, "end_to_end_samples_s": []})  # fmt: skip
    folder = write(tmp_path / "a", [measured, skipped, failed, profiled])
    loaded = load([folder])
    assert [p.status for p in loaded.points] == ["ok", "skipped", "error", "ok"]
    assert loaded.points[0].kernel_samples_s == measured.kernel_samples_s


# -- 2: nothing compared is an exit status of its own --------------------------------------------


def _b_all_errors(tmp_path: Path) -> tuple[Path, Path]:
    a, b = _pair(tmp_path)
    lines = _lines(b)
    for line in lines[1:]:
        line.update(status="error", reason="boom", kernel_s=None, end_to_end_s=None,
                    kernel_samples_s=[], end_to_end_samples_s=[])  # fmt: skip
    _rewrite(b, lines)
    return a, b


def _disjoint(tmp_path: Path) -> tuple[Path, Path]:
    a = write(tmp_path / "a", points(1, labels=("cpu",)))
    b = write(tmp_path / "b", points(2, run="rb", labels=("opencl:pocl",)), run="rb")
    return a, b


def _b_header_only(tmp_path: Path) -> tuple[Path, Path]:
    a, b = _pair(tmp_path)
    _rewrite(b, _lines(b)[:1])
    return a, b


def _a_empty_file(tmp_path: Path) -> tuple[Path, Path]:
    a, b = _pair(tmp_path)
    (a / "results.jsonl").write_text("")
    return a, b


@pytest.mark.parametrize("make", [_b_all_errors, _disjoint, _b_header_only, _a_empty_file])
@pytest.mark.parametrize("fail_on", [["--fail-on", "slower"], []])
def test_nothing_compared_is_exit_status_3(tmp_path, capsys, make, fail_on):
    """Before: every one of these exited 0 with "verdicts: none", --fail-on slower too."""
    a, b = make(tmp_path)
    code = main(["diff", str(a), str(b), "--out", str(tmp_path / "out"), *fail_on])
    printed = capsys.readouterr()
    assert code == 3
    assert "no point was measured in both runs: nothing compared (exit status 3)" in printed.err


def test_exit_status_3_is_stated_in_the_help_and_the_readme(capsys):
    with pytest.raises(SystemExit):
        main(["diff", "--help"])
    text = capsys.readouterr().out
    assert "exit status:" in text and "  3  no point was compared" in text
    readme = (ROOT / "README.md").read_text()
    assert "| `diff` finds no point measured in both runs" in readme
    assert "exit status 3" in readme


@pytest.mark.slow
def test_a_run_with_one_point_compared_still_exits_0(tmp_path):
    a, b = _pair(tmp_path)
    lines = _lines(b)
    for line in lines[2:]:  # every point but the first failed
        line.update(status="error", kernel_s=None, end_to_end_s=None, kernel_samples_s=[],
                    end_to_end_samples_s=[])  # fmt: skip
    _rewrite(b, lines)
    out = str(tmp_path / "out")
    assert main(["diff", str(a), str(b), "--out", out, "--fail-on", "slower"]) == 0


# -- 3: two hosts of one run -------------------------------------------------------------------


def _two_hosts(folder: Path, fast: str, slow: str, factor: float, seed: int) -> Path:
    """One results file of two runs of the same plan: ``fast``'s, then ``slow``'s, its
    points ``factor`` times slower."""
    folder.mkdir(parents=True)
    lines = []
    for run, host, scale in ((f"r-{fast}", fast, 1.0), (f"r-{slow}", slow, factor)):
        rng = np.random.default_rng(seed)
        lines.append(RunHeader(run_id=run, environment={"host": host}).to_dict())
        lines += [
            record(rng, v, n, run=run, scale=scale).to_dict() for v in VARIANTS for n in SIZES
        ]
    _rewrite(folder, lines)
    return folder


@pytest.mark.slow
def test_two_hosts_in_a_are_compared_host_by_host(tmp_path, capsys):
    """Before: A held vm's and other's points; the last (other's, 30% slower) took every
    key, and B (on vm, as fast as vm) came out FASTER everywhere."""
    a = _two_hosts(tmp_path / "a", "vm", "other", 1.3, seed=1)
    b = write(tmp_path / "b", points(2, run="rb", labels=("cpu",)), run="rb", host="vm")
    code = main(["diff", str(a), str(b), "--out", str(tmp_path / "out"), "--fail-on", "changed"])
    printed = capsys.readouterr()
    assert code == 0, printed.out  # vm against vm: nothing changed
    assert "FASTER" not in printed.out
    assert f"{len(VARIANTS) * len(SIZES)} only in A" in printed.out  # other's, named
    assert "B has no point of host other" in printed.out
    assert "several hosts (A: other, vm; B: vm)" in printed.err
    header = printed.out.splitlines()[0].split()
    assert "hosts" in header


def test_two_hosts_against_a_third_are_each_compared(tmp_path):
    a_folder = _two_hosts(tmp_path / "a", "vm", "other", 1.3, seed=1)
    b_points = points(2, run="rb", labels=("cpu",))
    a = load([a_folder]).points
    found = diff.compare_points(a, [p.__class__(**{**p.__dict__, "host": "new"}) for p in b_points])
    assert len(found) == 2 * len(VARIANTS) * len(SIZES)
    by_hosts: dict[str, set[str]] = {}
    for comparison in found:
        by_hosts.setdefault(comparison.hosts, set()).add(comparison.verdict)
    assert set(by_hosts) == {"vm / new", "other / new"}
    assert "FASTER" in by_hosts["other / new"] and "FASTER" not in by_hosts["vm / new"]


def test_two_hosts_on_both_sides_pair_up(tmp_path):
    a = load([_two_hosts(tmp_path / "a", "vm", "other", 1.3, seed=1)]).points
    b = load([_two_hosts(tmp_path / "b", "vm", "other", 1.3, seed=2)]).points
    found = diff.compare_points(a, b)
    assert len(found) == 2 * len(VARIANTS) * len(SIZES)
    assert {c.hosts for c in found} == {"vm", "other"}
    assert all(c.a is not None and c.b is not None and c.a.host == c.b.host for c in found)
    assert not {c.verdict for c in found} & {"FASTER", "SLOWER"}


def test_one_host_a_side_is_matched_whatever_the_host():
    rng = np.random.default_rng(3)
    a = record(rng, "tiled", 64, host="h1")
    b = record(rng, "tiled", 64, run="rb", host="h2")
    (comparison,) = diff.compare_points([a], [b])
    assert comparison.judged and comparison.hosts == ""


@pytest.mark.slow
def test_a_host_can_be_chosen_a_side(tmp_path, capsys):
    a = _two_hosts(tmp_path / "a", "vm", "other", 1.3, seed=1)
    b = write(tmp_path / "b", points(2, run="rb", labels=("cpu",)), run="rb", host="vm")
    out = str(tmp_path / "out")
    assert main(["diff", str(a), str(b), "--out", out, "--a-host", "other"]) == 0
    printed = capsys.readouterr().out
    assert f"{len(VARIANTS) * len(SIZES)} FASTER" in printed
    assert main(["diff", str(a), str(b), "--out", out, "--a-host", "nowhere"]) == 2
    assert "holds no point of host nowhere (its hosts: other, vm)" in capsys.readouterr().err


# -- 7: many points, many samples ---------------------------------------------------------------


def _comparisons(count: int, seed: int) -> list[diff.Comparison]:
    """``count`` judged comparisons, made directly (no bootstrap): a figure's input."""
    rng = np.random.default_rng(seed)
    found = []
    for index in range(count):
        label = ("cpu", "opencl:pocl", "cuda")[index % 3]
        key = PointKey(label, "D", "mm", VARIANTS[index % 3], 16, "float32", 1, 16 + index, 16, 16)
        ratio = float(rng.lognormal(0.0, 0.05))
        interval = diff.Interval(ratio, ratio * 0.98, ratio * 1.02)
        found.append(diff.Comparison(key, None, None, diff.verdict(interval, 0.05), interval))
    return found


@pytest.mark.slow
def test_many_points_are_drawn_as_a_summary_of_bounded_size():
    """Before: one error bar per point, 20,000 of them: minutes to draw."""
    figure = ratio_figure(_comparisons(20_000, 5), 0.05, names=("a", "b"))
    FigureCanvasAgg(figure).draw()
    shares, bars = figure.axes
    lines = [line for line in shares.get_lines() if str(line.get_gid()).startswith("share:")]
    assert len(lines) == 3  # one per backend
    assert all(np.asarray(line.get_xdata()).size <= 201 for line in lines)
    assert "20,000 points" in figure.get_suptitle()
    widths = [patch.get_width() for patch in bars.patches if isinstance(patch, Rectangle)]
    assert len(widths) == 3 * 4 and sum(widths) == 20_000  # each backend's verdicts counted
    assert [tick.get_text() for tick in bars.get_yticklabels()] == [
        "cpu: D", "opencl:pocl: D", "cuda: D",
    ]  # the most points first  # fmt: skip
    legend = {text.get_text() for text in figure.legends[0].get_texts()}
    assert {"cpu: D", "slower", "faster", "within ±5%"} <= legend


@pytest.mark.slow
def test_few_points_are_still_drawn_one_by_one():
    figure = ratio_figure(_comparisons(MOST_POINTS, 6), 0.05)
    assert len(figure.axes) == 3  # a panel per backend, error bars in it


def _many(folder: Path, run: str, seed: int, sizes: range) -> Path:
    """A results file of 2 backends × 3 variants × ``sizes``, 30 samples a point, written
    straight as JSON lines (records with statistics of their own would take longer)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    lines: list[dict[str, object]] = [RunHeader(run, environment={"host": "h"}).to_dict()]
    for label in ("cpu", "opencl:pocl"):
        for variant in VARIANTS:
            times = 1e-9 * np.array(sizes, dtype=np.float64) ** 2
            drawn = times[:, None] * rng.lognormal(0.0, 0.03, (len(sizes), 30))
            for n, samples in zip(sizes, drawn.tolist(), strict=True):
                quartiles = np.quantile(samples, [0.25, 0.5, 0.75])
                kernel = {"median": quartiles[1], "q1": quartiles[0], "q3": quartiles[2],
                          "min": min(samples)}  # fmt: skip
                lines.append({"type": "point", "run_id": run, "backend": label[:3],
                              "label": label, "device": "D", "variant": variant, "tile": 16,
                              "dtype": "float32", "M": n, "K": n, "N": n, "flops": 2 * n**3,
                              "status": "ok", "kernel_s": kernel, "end_to_end_s": kernel,
                              "kernel_samples_s": samples,
                              "end_to_end_samples_s": samples})  # fmt: skip
    _rewrite(folder, lines)
    return folder


# The child's own peak: VmHWM, its memory's high-water mark. Not getrusage's ru_maxrss,
# which Linux carries over an exec from the process that forked it: under a pytest worker
# grown to 1 GB by earlier tests, the child read 1 GB before it had done anything.
_MEASURED_RUN = """
import sys
from xbackend.cli import main
code = main(sys.argv[1:])
status = open("/proc/self/status").read()
peak = next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))
print("maxrss_kib", peak, file=sys.stderr)
sys.exit(code)
"""


@pytest.mark.slow
def test_a_diff_of_many_points_is_quick_and_small_and_draws_a_small_figure(tmp_path):
    """6,000 points a side (the issue's 60,000 took 100 s to diff.csv and 6 more minutes
    to diff.png). Before: 6,000 took 45 s, 506 MB resident and wrote an SVG of 5.6 MB;
    after: 6 s, 160 MB and 70 kB."""
    sides = [
        _many(tmp_path / name, name, seed, range(16, 1016)) for name, seed in (("a", 1), ("b", 2))
    ]
    out = tmp_path / "out"
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _MEASURED_RUN, "diff", *map(str, sides), "--out", str(out)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    assert done.returncode == 0, done.stderr
    assert seconds < 120  # generous: about 10 s on 2 shared cores
    resident_kib = int(done.stderr.split("maxrss_kib")[1].split()[0])
    assert resident_kib < 350 * 1024
    assert (out / "diff.png").exists()
    assert (out / "diff.svg").stat().st_size < 500_000
    rows = list(csv.DictReader((out / "diff.csv").open()))
    assert len(rows) == 6000 and {r["verdict"] for r in rows} <= {"SAME", "UNCERTAIN"}
    assert main(["diff", *map(str, sides), "--out", str(tmp_path / "bare"), "--no-plots"]) == 0
    assert sorted(p.name for p in (tmp_path / "bare").iterdir()) == ["diff.csv"]


def test_a_point_of_100000_samples_bootstraps_in_bounded_memory():
    """Before: 2000 resamples of 100,000 samples, indices and values: 3.2 GB."""
    rng = np.random.default_rng(9)
    a = list(1e-3 * rng.lognormal(0.0, 0.03, 100_000))
    b = list(1.01e-3 * rng.lognormal(0.0, 0.03, 100_000))
    tracemalloc.start()
    try:
        interval = diff.ratio_interval(a, b)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20  # the samples sorted, and a few arrays of 2000
    assert interval.low < 1.01 < interval.high and interval.high - interval.low < 0.005


def _at_least(k: int, n: int, p: float) -> float:
    """P(Binomial(n, p) ≥ k)."""
    return sum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(k, n + 1))


@pytest.mark.parametrize("n", [1, 2, 7, 8, 31, 30])
def test_the_drawn_medians_are_the_plain_bootstraps(n):
    """The bootstrap medians drawn by order statistics have the distribution of plain
    resampling's: against the exact one for an odd n (P(median ≤ x₍ₖ₎) = P(Bin(n, k/n)
    ≥ (n + 1)/2)), against plain resampling for an even n."""
    rng = np.random.default_rng(n)
    samples = np.sort(rng.lognormal(0.0, 0.1, n))
    drawn = diff.bootstrap_medians(samples, 40_000, np.random.default_rng(1))
    assert set(np.unique(drawn)) <= set(((samples[:, None] + samples[None, :]) / 2).ravel())
    grid = np.unique(np.concatenate([samples, (samples[:-1] + samples[1:]) / 2]))
    below = np.searchsorted(np.sort(drawn), grid, side="right") / drawn.size
    if n % 2:
        expected = np.array([_at_least((n + 1) // 2, n, k / n) for k in range(1, n + 1)])
        below = np.searchsorted(np.sort(drawn), samples, side="right") / drawn.size
    else:
        picks = np.random.default_rng(2).integers(0, n, size=(40_000, n))
        plain = np.sort(np.median(samples[picks], axis=1))
        expected = np.searchsorted(plain, grid, side="right") / plain.size
    assert np.max(np.abs(below - expected)) < 0.015


# -- 15: control characters are shown, not obeyed -----------------------------------------------

HOSTILE = "\x1b[2J\x1b]0;owned\x07"


@pytest.mark.slow
def test_control_characters_of_the_files_are_shown_on_the_terminal(tmp_path, capsys):
    """Before: ESC sequences in labels, devices, variants, dtypes and operations reached
    the terminal raw."""
    rng = np.random.default_rng(12)
    fields = {"label": f"cpu{HOSTILE}", "device": f"D{HOSTILE}", "dtype": f"float32{HOSTILE}"}
    a_points = [record(rng, f"tiled{HOSTILE}", n, **fields) for n in SIZES]
    b_points = [record(rng, f"tiled{HOSTILE}", n, run="rb", **fields) for n in SIZES]
    only_a = record(rng, "naive", 64, op=f"mm{HOSTILE}")
    a = write(tmp_path / "a", [*a_points, only_a], host=f"vm{HOSTILE}")
    b = write(tmp_path / "b", b_points, run="rb", host=f"h2{HOSTILE}")
    assert main(["diff", str(a), str(b), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr()
    for stream in (printed.out, printed.err):
        assert "\x1b" not in stream and "\x07" not in stream
    assert printable(f"cpu{HOSTILE}") in printed.out
    assert printable(f"mm{HOSTILE}") in printed.out
    assert r"cpu\x1b[2J\x1b]0;owned\x07" in printed.out
    assert main(["diff", str(a), str(b), "--out", str(tmp_path / "out"), "--backends", "x"]) == 2
    assert "\x1b" not in capsys.readouterr().err


def test_printable_shows_every_control_character():
    assert printable("a\x1b[31mb\nc\td\u202e") == r"a\x1b[31mb\nc\td\u202e"
    assert printable("plain µs ×") == "plain µs ×"
