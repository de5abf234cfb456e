"""What a sweep shows while it runs: the live bar and its lines fit the terminal, a skip
reason is said once per configuration, quiet is quiet, and the ETA counts cost."""

from __future__ import annotations

import io
import re

from rich.console import Console

from xbackend.backends.cpu import CpuBackend
from xbackend.cost import CostModel
from xbackend.problems import Shape
from xbackend.progress import SweepDisplay, choose_mode, format_eta
from xbackend.runner import Plan, configs, point_time_s, run
from xbackend.runner import _Sweep as Sweep

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
    plan = Plan(shapes=SHAPES, variants=["naive", "tiled", "vendor"], samples=2, min_samples=1)
    run(plan, [("a-long-backend-label", CpuBackend())], tmp_path, display=display)
    lines = _visible_lines(screen)
    assert any(line.startswith("[ 1/15] a-long-backend-label") for line in lines)
    assert any(line.endswith("…") for line in lines)  # cut to the width, not wrapped
    assert max(len(line) for line in lines) <= 60


def test_a_skip_reason_is_said_once_per_configuration(tmp_path):
    said: list[str] = []
    plan = Plan(shapes=SHAPES, variants=["naive"], samples=1, min_samples=1, budget_s=1e-9)
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
    plan = Plan(shapes=SHAPES[:2], variants=["vendor"], samples=1, min_samples=1)
    run(plan, [("cpu", CpuBackend())], tmp_path, display=display)
    assert said == [] and screen.getvalue() == ""


def test_the_mode_follows_the_terminal():
    console, _ = _terminal(80)
    assert choose_mode(console) == "live"
    assert choose_mode(console, quiet=True) == "quiet"
    piped = Console(file=io.StringIO())
    assert choose_mode(piped) == "plain"


def test_the_eta_counts_each_point_by_its_predicted_cost(tmp_path):
    plan = Plan(shapes=[Shape(100, 100, 100), Shape(200, 200, 200)], variants=["naive"],
                samples=3, min_samples=3, warmup=1, timeout_s=100.0)  # fmt: skip
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
    plan = Plan(shapes=[Shape(8, 8, 8)], budget_s=1.0, min_samples=3, warmup=1)
    assert point_time_s(plan, 1.0) == 0.0
    assert point_time_s(plan, None) is None
    assert CostModel().predict("line", 10) is None


def test_the_eta_reads_as_a_duration():
    assert format_eta(None) == "eta ?"
    assert format_eta(42.4) == "eta 42s"
    assert format_eta(125) == "eta 2m05s"
    assert format_eta(3 * 3600 + 60) == "eta 3h01m"
