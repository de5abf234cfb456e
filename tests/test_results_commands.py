"""``xbackend plot`` and ``xbackend report`` with filters, on a results file."""

from __future__ import annotations

import dataclasses
import json

import pytest
from test_plots import drawn, point, run

from xbackend.cli import main
from xbackend.results import load
from xbackend.results.reading import apart, load_runs


def _results(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    lines = [{"type": "run", "run_id": "r"}, *(p.to_dict() for p in run())]
    (folder / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return folder


@pytest.mark.slow
def test_plot_variants_naive_tiled_redraws_a_run(tmp_path, capsys):
    out = tmp_path / "figures"
    assert (
        main(["plot", "--variants", "naive,tiled", str(_results(tmp_path)), "--out", str(out)]) == 0
    )
    assert (out / "runtime_by_backend.png").exists() and not (out / "ladder.png").exists()
    assert "warp" not in capsys.readouterr().out


def test_a_filter_that_leaves_nothing_is_one_line(tmp_path, capsys):
    code = main(["plot", "--backends", "cuda", str(_results(tmp_path)), "--out", str(tmp_path)])
    assert code == 2
    error = capsys.readouterr().err
    assert error == "xbackend: error: --backends cuda matches no point; present: cpu, opencl\n"


@pytest.mark.slow
def test_report_takes_the_filters(tmp_path):
    out = tmp_path / "report"
    assert (
        main(
            [
                "report",
                "--op",
                "mm",
                "--variants",
                "ladder",
                str(_results(tmp_path)),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    markdown = (out / "report.md").read_text()
    assert "48 points from 1 run " in markdown  # 8 ladder variants, 2 backends, 3 sizes


# -- several runs: kept apart where they measured the same points ------------------------------


def _folder(path, records, run_id="r"):
    path.mkdir(parents=True)
    lines = [{"type": "run", "run_id": run_id}, *(p.to_dict() for p in records)]
    (path / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _slower(records, run_id, factor=1.5):
    return [
        dataclasses.replace(
            p,
            run_id=run_id,
            kernel_s={key: value * factor for key, value in (p.kernel_s or {}).items()},
        )
        for p in records
    ]


@pytest.mark.slow
def test_runs_of_the_same_points_are_drawn_and_tabled_apart(tmp_path, capsys):
    records = run(("naive", "tiled"), labels=("opencl",))
    first = _folder(tmp_path / "monday", records)
    second = _folder(tmp_path / "tuesday", _slower(records, "r2"), "r2")
    out = tmp_path / "figures"
    assert main(["plot", str(first), str(second), "--out", str(out)]) == 0
    table = capsys.readouterr().out
    assert "opencl (run monday)" in table and "opencl (run tuesday)" in table
    figure = drawn(apart([*load([first]).points, *load([second]).points]))["runtime_all"]
    assert len([line for line in figure.axes[0].get_lines() if line.get_gid()]) == 4


@pytest.mark.slow
def test_a_single_run_and_runs_of_other_points_look_as_they_did(tmp_path, capsys):
    cpu = _folder(tmp_path / "cpu", run(("naive", "tiled"), labels=("cpu",)))
    opencl = _folder(tmp_path / "opencl", run(("naive", "tiled"), labels=("opencl",)), "r2")
    assert main(["plot", str(cpu), str(opencl), "--out", str(tmp_path / "figures")]) == 0
    assert main(["plot", str(cpu), "--out", str(tmp_path / "one")]) == 0
    assert "(run " not in capsys.readouterr().out


def test_a_resumed_run_is_one_run(tmp_path):
    """A resume appends under a new run id; a point skipped before may be measured now."""
    first = run(("naive", "tiled"), sizes=(16, 32), labels=("cpu",))
    skipped = dataclasses.replace(point("tiled", 64, label="cpu"), status="skipped", kernel_s=None)
    resumed = _slower(run(("naive", "tiled"), sizes=(64,), labels=("cpu",)), "r2")
    folder = tmp_path / "run"
    folder.mkdir()
    lines = [{"type": "run", "run_id": "r"}, *(p.to_dict() for p in [*first, skipped])]
    lines += [{"type": "run", "run_id": "r2"}, *(p.to_dict() for p in resumed)]
    (folder / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    loaded, runs = load_runs([folder, folder / "results.jsonl"])  # the same file, read once
    assert len(loaded.points) == len(first) + 1 + len(resumed)
    assert set(runs.values()) == {"run"}
    assert {p.label for p in apart(loaded.points, runs)} == {"cpu"}


def test_files_joined_by_hand_are_one_run_per_id_and_cache_modes_are_named():
    records = run(("tiled",), labels=("cpu",))
    cold = [dataclasses.replace(p, run_id="r2", cache="cold") for p in records]
    labels = {p.label for p in apart([*records, *cold])}  # no file names: the run ids
    assert labels == {"cpu (run r, warm cache)", "cpu (run r2, cold cache)"}


@pytest.mark.slow
def test_the_report_shows_each_run_of_the_same_points(tmp_path):
    records = run(("naive", "tiled"), labels=("opencl",))
    first = _folder(tmp_path / "monday", records)
    second = _folder(tmp_path / "tuesday", _slower(records, "r2"), "r2")
    out = tmp_path / "report"
    assert main(["report", str(first), str(second), "--out", str(out)]) == 0
    markdown = (out / "report.md").read_text()
    assert "opencl (run monday)" in markdown and "opencl (run tuesday)" in markdown
