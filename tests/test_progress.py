"""What a sweep shows while it runs: the live bar and its lines fit the terminal, a skip
reason is said once per configuration, quiet is quiet, the ETA counts cost, and a
point's line gives the interval of the median that its sampling stopped on."""

from __future__ import annotations

import dataclasses
import io
import re

import numpy as np
from rich.console import Console

from xbackend.backends.cpu import CpuBackend
from xbackend.measuring.timing import Sampling, Stats, interval_share
from xbackend.problems import Shape
from xbackend.results import PointRecord
from xbackend.sweep.cost import CostModel
from xbackend.sweep.progress import SweepDisplay, choose_mode, equality_line, format_eta
from xbackend.sweep.runner import Plan, Sweep, configs, point_time_s, run

SHAPES = [Shape(8 * i, 7 * i, 8 * i) for i in range(1, 6)]
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _terminal(width: int) -> tuple[Console, io.StringIO]:
    screen = io.StringIO()
    console = Console(file=screen, width=width, force_terminal=True, color_system=None)
    return console, screen


def _visible_lines(screen: io.StringIO) -> list[str]:
    return [part for part in re.split(r"[\r\n]", _CONTROL.sub("", screen.getvalue())) if part]


def test_every_line_of_a_live_sweep_fits_the_terminal(tmp_path):
    console, screen = _terminal(60)
    display = SweepDisplay("live", console=console)
    plan = Plan(
        shapes=SHAPES,
        variants=["naive", "tiled", "vendor"],
        sampling=Sampling(max_samples=2, min_samples=1),
    )
    run(plan, [("a-long-backend-label", CpuBackend())], tmp_path, display=display)
    lines = _visible_lines(screen)
    assert any(line.startswith("[ 1/15] a-long-backend-label") for line in lines)
    assert any(line.endswith("…") for line in lines)  # cut to the width, not wrapped
    assert max(len(line) for line in lines) <= 60


def test_a_skip_reason_is_said_once_per_configuration(tmp_path):
    said: list[str] = []
    plan = Plan(
        shapes=SHAPES,
        variants=["naive"],
        budget_s=1e-9,
        sampling=Sampling(max_samples=1, min_samples=1),
    )
    records = run(plan, [("cpu", CpuBackend())], tmp_path, log=said.append)
    skipped = [r for r in records if r.status == "skipped"]
    assert len(skipped) >= 2  # the budget skips every size after the first two
    reasons = [line for line in said if "skipped:" in line]
    assert len(reasons) == 1 and "--budget" in reasons[0]
    assert any(f"{len(skipped) - 1} more skipped points not listed" in line for line in said)


def test_quiet_shows_no_point_lines(tmp_path):
    console, screen = _terminal(80)
    said: list[str] = []
    display = SweepDisplay("quiet", console=console, log=said.append)
    plan = Plan(
        shapes=SHAPES[:2], variants=["vendor"], sampling=Sampling(max_samples=1, min_samples=1)
    )
    run(plan, [("cpu", CpuBackend())], tmp_path, display=display)
    assert said == [] and screen.getvalue() == ""


def test_the_mode_follows_the_terminal():
    console, _ = _terminal(80)
    assert choose_mode(console) == "live"
    assert choose_mode(console, quiet=True) == "quiet"
    piped = Console(file=io.StringIO())
    assert choose_mode(piped) == "plain"


def test_the_eta_counts_each_point_by_its_predicted_cost(tmp_path):
    plan = Plan(
        shapes=[Shape(100, 100, 100), Shape(200, 200, 200)],
        variants=["naive"],
        sampling=Sampling(max_samples=3, min_samples=3, warmup=1, timeout_s=100.0),
    )
    todo = configs(plan, [("cpu", CpuBackend())])
    sweep = Sweep(plan, "run", todo, {}, SweepDisplay("plain", log=lambda line: None))
    assert sweep.remaining_s(1) is None  # nothing to go by yet
    (config,) = todo
    sweep.cost.add(config, 2 * 100**3, 0.01)
    sweep.cost.add(config, 2 * 50**3, 0.01 / 8)
    sweep.finished.add((1, config))
    left = sweep.remaining_s(1)
    assert left is not None
    # the larger size costs 8× the smaller's time per run, times 1 + warm-up + samples
    assert abs(left - 0.08 * 5) < 1e-9
    assert point_time_s(plan, 0.08) == left


def test_a_point_over_the_budget_costs_nothing_in_the_eta():
    plan = Plan(shapes=[Shape(8, 8, 8)], budget_s=1.0, sampling=Sampling(min_samples=3, warmup=1))
    assert point_time_s(plan, 1.0) == 0.0
    assert point_time_s(plan, None) is None
    assert CostModel().predict("line", 10) is None


def test_the_eta_reads_as_a_duration():
    assert format_eta(None) == "eta ?"
    assert format_eta(42.4) == "eta 42s"
    assert format_eta(125) == "eta 2m05s"
    assert format_eta(3 * 3600 + 60) == "eta 3h01m"


def _timed_point(samples_s: list[float], stop: str) -> PointRecord:
    stats = Stats.of(samples_s).to_dict()
    return PointRecord(
        run_id="r", backend="cpu", label="cpu", device="CPU", variant="naive", tile=None,
        dtype="float32", M=64, K=64, N=64, flops=2 * 64**3, status="ok", equal=True,
        max_abs_error=0.0, bound_ratio=0.01, kernel_s=stats, end_to_end_s=stats,
        kernel_samples_s=samples_s, gflops=1.0, stop=stop,
    )  # fmt: skip


def test_a_point_line_shows_the_interval_of_the_median_not_the_noise():
    """±14% of relative noise, 400 samples: the median is known to about ±2%, and that
    interval, the one sampling stopped on, is what the line says."""
    samples = list(np.exp(np.random.default_rng(27).normal(np.log(1e-3), 0.14, 400)))
    record = _timed_point(samples, "interval")
    share = interval_share(samples)
    noise = record.kernel_s["noise"] if record.kernel_s else None
    assert noise is not None and f"{noise:.1%}" != f"{share:.1%}" and share < noise / 5
    line = equality_line(record, 3, 10)
    assert f"±{share:.1%} (95% interval of the median, n=400, stop: interval)" in line
    assert f"{noise:.1%}" not in line


def test_a_point_of_one_sample_claims_no_interval():
    line = equality_line(_timed_point([2e-3], "timeout"), 1, 1)
    assert "kernel 2 ms (n=1, stop: timeout)" in line and "±" not in line


def test_a_batched_point_with_samples_left_out_says_so_after_its_interval():
    samples = [1e-3 + 1e-6 * k for k in np.random.default_rng(5).permutation(10)]
    record = dataclasses.replace(_timed_point(samples, "interval"), launches=15,
                                 sample_marks=["throttled", *[""] * 9])  # fmt: skip
    # Ten samples, 1.000 to 1.009 ms: the 2nd and 9th, 1.001 and 1.008 ms, around 1.0045 ms.
    share = 0.0035 / 1.0045
    line = equality_line(record, 1, 1)
    assert f"±{share:.1%} (95% interval of the median, n=10×15, stop: interval, 1 left out)" in line


def test_an_interval_past_the_median_and_an_end_to_end_under_the_kernel_are_explained():
    """Issue 53: ``±399%`` and an end-to-end time under the kernel time read as errors
    unless the line says what they are."""
    rng = np.random.default_rng(5305)
    spread = [float(s) for s in 1e-4 * np.exp(rng.normal(0, 1.6, 9))]
    record = _timed_point(spread, "capped")
    share = interval_share(spread)
    assert share > 1
    line = equality_line(record, 1, 1)
    assert (
        f"±{share:.1%} (95% interval of the median, n=9, stop: capped: the interval spans "
        "more than twice the median, no time to compare)"
    ) in line
    quick = [float(s) for s in 2e-4 * (1 + 0.01 * rng.standard_normal(9))]
    batched = dataclasses.replace(
        _timed_point([s * 3 for s in quick], "interval"),
        launches=12, end_to_end_s=Stats.of(quick).to_dict(), end_to_end_samples_s=quick,
    )  # fmt: skip
    assert (
        " (under the kernel time: that is the mean of a batch of 12 launches run after the "
        "product, which ran slower per launch than the product alone)"
    ) in equality_line(batched, 1, 1)
    assert "under the kernel time" not in equality_line(_timed_point(quick, "interval"), 1, 1)
