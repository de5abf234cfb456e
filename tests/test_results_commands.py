"""``xbackend plot`` and ``xbackend report`` with filters, on a results file."""

from __future__ import annotations

import json

from test_plots import run

from xbackend.cli import main


def _results(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    lines = [{"type": "run", "run_id": "r"}, *(p.to_dict() for p in run())]
    (folder / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return folder


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
