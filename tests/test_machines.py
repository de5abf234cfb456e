"""Machines side by side: the host is part of a point's identity where results of several
machines merge, and ``report``/``plot`` put the same configuration on each machine side by
side (``xbackend.analysis.side_by_side``, ``figures/machines.py``, ``report/side_by_side.py``)."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from test_diff import record

from xbackend.analysis import diff, side_by_side
from xbackend.cli import main
from xbackend.figures.machines import MACHINE_COLOURS, figures
from xbackend.results import PointRecord, RecordError, RunHeader, latest, load
from xbackend.results.reading import apart, load_runs

# One worker runs this file's tests (pytest-xdist): its module fixture
# (two_machines) is made once.
pytestmark = pytest.mark.xdist_group("test_machines")

OTHER_HOST = "gpu-box-2"
COMPARE = ["compare", "--backends", "cpu", "--variants", "naive,tiled,vendor", "--tile", "8"]
COMPARE += ["--steps", "2", "--samples", "8", "--min-samples", "8", "--no-plots", "--quiet"]


def _set_host(folder: Path, host: str) -> None:
    """Rewrite the run headers' host, as if the run had been made on ``host``."""
    path = folder / "results.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for line in lines:
        if line["type"] == "run":
            line["environment"]["host"] = host
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


@pytest.fixture(scope="module")
def two_machines(tmp_path_factory):
    """Two results folders of the same tiny CPU comparison, the second on another host."""
    root = tmp_path_factory.mktemp("machines")
    first, second = root / "first", root / "second"
    for folder in (first, second):
        assert main([*COMPARE, "--out", str(folder)]) == 0
    _set_host(second, OTHER_HOST)
    return first, second


def _host(folder: Path) -> str:
    return next(iter(load([folder]).runs.values())).host


# -- identity ----------------------------------------------------------------------------------


def test_every_point_read_has_its_run_headers_host(two_machines):
    first, second = two_machines
    assert _host(first) != OTHER_HOST
    assert {p.host for p in load([first]).points} == {_host(first)}
    assert {p.host for p in load([second]).points} == {OTHER_HOST}
    line = json.loads((second / "results.jsonl").read_text().splitlines()[1])
    assert "host" not in line  # the file is as the runner wrote it


def test_two_machines_points_do_not_collide(two_machines):
    first, second = two_machines
    a, b = load([first]).points, load([second]).points
    merged = latest(load([first, second]).points)
    assert len(merged) == len(a) + len(b)
    assert {p.key for p in a} == {p.key for p in b}  # the same configurations and sizes
    assert len({p.identity for p in merged}) == len(merged)


def test_runs_of_two_hosts_are_named_by_host(two_machines):
    loaded, runs = load_runs(list(two_machines))
    labels = {p.label for p in apart(loaded.points, runs)}
    assert labels == {f"cpu (on {_host(two_machines[0])})", f"cpu (on {OTHER_HOST})"}


def test_diff_still_matches_two_hosts_by_configuration(two_machines):
    first, second = two_machines
    comparisons = diff.compare_points(latest(load([first]).points), latest(load([second]).points))
    assert comparisons and not [c for c in comparisons if c.verdict in (diff.ONLY_A, diff.ONLY_B)]


def test_a_resume_on_its_machine_measures_nothing_again(two_machines, tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    source = (two_machines[0] / "results.jsonl").read_text()
    (folder / "results.jsonl").write_text(source)
    assert main([*COMPARE, "--out", str(folder), "--resume"]) == 0
    points = load([folder]).points
    assert len(points) == source.count('"type": "point"')


def test_a_host_in_a_point_is_kept_and_checked():
    point = record(np.random.default_rng(1), "tiled", 64, host="node-7", gflops=1.0)
    assert PointRecord.from_dict(point.to_dict()) == point
    assert "host" not in dataclasses.replace(point, host="").to_dict()
    with pytest.raises(RecordError, match="host"):
        PointRecord.from_dict({**point.to_dict(), "host": 7})


def test_a_point_naming_its_host_keeps_it(tmp_path):
    point = record(np.random.default_rng(1), "tiled", 64, run="r", host="worker-3")
    header = RunHeader(run_id="r", environment={"host": "scheduler"})
    lines = [header.to_dict(), point.to_dict(), dataclasses.replace(point, host="").to_dict()]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert [p.host for p in load([tmp_path]).points] == ["worker-3", "scheduler"]


# -- the table ---------------------------------------------------------------------------------


def test_the_table_has_each_machines_ratio_to_the_base(two_machines):
    first, second = two_machines
    points = load([first, second]).points
    rows = side_by_side.compare_machines(points)
    assert len(rows) == len(load([first]).points)  # every configuration and size, on both
    for row in rows:
        base, other = row.sides
        assert row.base == base.machine and base.machine.host == _host(first)
        assert other.machine == side_by_side.Machine(OTHER_HOST, base.point.device)
        assert other.kernel is not None and other.kernel.interval is not None
        expected = np.median(other.point.kept_kernel_samples_s) / np.median(
            base.point.kept_kernel_samples_s
        )
        ratio, low, high = other.kernel.interval
        assert ratio == pytest.approx(expected)
        assert low <= expected <= high
        assert other.end_to_end is not None and other.end_to_end.interval is not None
        expected = np.median(other.point.kept_end_to_end_samples_s) / np.median(
            base.point.kept_end_to_end_samples_s
        )
        assert other.end_to_end.interval.ratio == pytest.approx(expected)


def _synthetic(factor: float) -> list[PointRecord]:
    """Two machines' records with the same GPU; the second's kernels ``factor`` times as long."""
    rng = np.random.default_rng(11)
    found = []
    for host, scale in (("box-a", 1.0), ("box-b", factor)):
        for variant in ("naive", "tiled"):
            for n in (64, 128, 256):
                found.append(
                    record(rng, variant, n, scale=scale, run=host, device="GPU X", host=host)
                )
    return found


def test_a_machine_twice_as_slow_reads_two_and_its_base_one_half():
    points = _synthetic(2.0)
    rows = side_by_side.compare_machines(points)
    assert len(rows) == 6
    for row in rows:
        compared = row.sides[1].kernel
        assert compared is not None and compared.interval is not None
        assert compared.interval.low < 2.0 * 1.05 and compared.interval.high > 2.0 / 1.05
        assert compared.verdict == diff.SLOWER
    swapped = side_by_side.compare_machines(points, base="box-b")
    assert [row.base.host for row in swapped if row.base] == ["box-b"] * 6
    for row in swapped:
        compared = row.sides[1].kernel
        assert compared is not None and compared.verdict == diff.FASTER
        assert compared.interval is not None and compared.interval.ratio < 0.56
    with pytest.raises(ValueError, match="present: box-a · GPU X; box-b · GPU X"):
        side_by_side.compare_machines(points, base="box-c")


def test_only_configurations_on_several_machines_are_rows():
    points = _synthetic(1.0)
    alone = record(np.random.default_rng(2), "vendor", 64, run="box-a", host="box-a")
    rows = side_by_side.compare_machines([*points, alone])
    assert "vendor" not in {row.configuration.variant for row in rows}
    assert not side_by_side.compare_machines([p for p in points if p.host == "box-a"])
    one_host = [p for p in points if p.host == "box-a"]
    other_gpu = [dataclasses.replace(p, device="GPU Y") for p in one_host]
    rows = side_by_side.compare_machines([*one_host, *other_gpu])  # one host, two devices
    assert len(rows) == 6 and {row.base for row in rows} == {("box-a", "GPU X")}


def test_the_figures_give_each_machine_its_colour():
    points = _synthetic(2.0)
    third = [dataclasses.replace(p, host="box-c") for p in points if p.host == "box-b"]
    rows = side_by_side.compare_machines([*points, *third])
    drawn = dict(figures(rows))
    assert set(drawn) == {"machines", "machines_by_size"}
    legend = drawn["machines"].legends[0]
    names = [text.get_text() for text in legend.get_texts()]
    assert names[:3] == ["box-b · GPU X", "box-c · GPU X", "base: box-a · GPU X"]
    axes = drawn["machines"].axes[0]
    assert len(axes.get_yticks()) == 2  # naive and tiled, each at its largest size
    colours = {line.get_color() for line in axes.get_lines() if line.get_marker() == "o"}
    assert colours == set(MACHINE_COLOURS[:2])


# -- the commands ------------------------------------------------------------------------------


@pytest.mark.slow
def test_report_of_two_machines_puts_them_side_by_side(two_machines, tmp_path):
    first, second = two_machines
    out = tmp_path / "report"
    assert main(["report", str(first), str(second), "--out", str(out)]) == 0
    markdown = (out / "report.md").read_text()
    assert "## The machines side by side" in markdown
    device = load([first]).points[0].device
    assert f"- {_host(first)} · {device} (base)" in markdown
    assert f"- {OTHER_HOST} · {device}\n" in markdown
    assert (out / "report_figures" / "machines" / "machines.png").stat().st_size > 10_000
    with (out / "machines.csv").open() as file:
        rows = list(csv.DictReader(file))
    points = load([first]).points
    assert len(rows) == 2 * len(points)
    others = [r for r in rows if r["host"] == OTHER_HOST]
    assert all(r["base"] == f"{_host(first)} · {device}" and r["kernel_ratio"] for r in others)


@pytest.mark.slow
def test_report_of_one_machine_has_no_such_section(two_machines, tmp_path):
    out = tmp_path / "report"
    assert main(["report", str(two_machines[0]), "--out", str(out)]) == 0
    assert "Machines side by side" not in (out / "report.md").read_text()
    assert not (out / "machines.csv").exists()


def test_two_machines_of_one_host_name_are_told_apart_by_their_device(two_machines):
    """Virtual machines often share a host name (vm): the base is a machine, not a host."""
    first, second = two_machines
    points = [p for p in load([first, second]).points if p.status == "ok"]
    renamed = [dataclasses.replace(p, host="vm", device=f"GPU {p.host}") for p in points]
    one, other = (side_by_side.Machine("vm", f"GPU {_host(f)}") for f in (first, second))
    rows = side_by_side.compare_machines(renamed)
    assert rows and all(row.base == one for row in rows)
    assert all(len(row.sides) == 2 and row.sides[1].kernel is not None for row in rows)
    swapped = side_by_side.compare_machines(renamed, base=other.device)
    assert all(row.base == other for row in swapped)
    assert side_by_side.base_machine(renamed, other.name) == other
    with pytest.raises(ValueError, match="present: vm · GPU"):
        side_by_side.base_machine(renamed, "vm · GPU nowhere")


@pytest.mark.slow
def test_plot_draws_the_machines_and_takes_a_base_host(two_machines, tmp_path, capsys):
    first, second = two_machines
    out = tmp_path / "figures"
    assert (
        main(["plot", str(first), str(second), "--base-host", OTHER_HOST, "--out", str(out)]) == 0
    )
    assert (out / "machines.png").exists() and (out / "machines_by_size.png").exists()
    with (out / "machines.csv").open() as file:
        bases = {row["base"].split(" · ")[0] for row in csv.DictReader(file)}
    assert bases == {OTHER_HOST}
    code = main(["plot", str(first), str(second), "--base-host", "nowhere", "--out", str(out)])
    assert code == 2
    assert "--base-host nowhere: no results from that machine" in capsys.readouterr().err
