"""Tables per size (xbackend.analysis.tables): rows against the records, the terminal table, the
CSV, and the selection of records by the plot and report filters."""

from __future__ import annotations

import csv
import dataclasses

import pytest
from test_plots import point, run

from xbackend.analysis.tables import select, size_rows, size_table, write_size_csv


def test_size_rows_carry_each_configurations_times_and_the_speedup():
    points = run(("naive", "tiled", "vendor"), sizes=(16, 32), labels=("opencl",))
    rows = size_rows(points)
    assert len(rows) == 6
    assert [(r["N"], r["variant"]) for r in rows[:3]] == [
        (16, "naive"),
        (16, "tiled"),
        (16, "vendor"),
    ]
    naive, tiled, _ = rows[:3]
    assert tiled["kernel_median_s"] == pytest.approx(16e-6)
    assert tiled["kernel_q1_s"] == pytest.approx(16e-6 * 0.9)
    assert tiled["end_to_end_median_s"] == pytest.approx(16e-6)
    assert tiled["speedup_vs_naive"] == pytest.approx(2.0)
    assert naive["speedup_vs_naive"] is None
    assert tiled["backend"] == "opencl" and tiled["tile"] == 16 and tiled["op"] == "mm"


def test_no_speedup_without_a_verified_naive_point():
    points = [point("naive", 16, status="mismatch"), point("tiled", 16)]
    assert size_rows(points)[1]["speedup_vs_naive"] is None
    skipped = point("tiled", 32, status="skipped")
    row = size_rows([skipped])[0]
    assert row["kernel_median_s"] is None and row["status"] == "skipped"


def test_size_table_has_a_block_per_size_and_fits_a_width():
    points = run(("naive", "tiled"), sizes=(16, 32), labels=("opencl",))
    table = size_table(points)
    assert table.count("size 16×16 · 16×16") == 1 and "size 32×32 · 32×32" in table
    assert "2×" in table and "× naive" in table
    assert all(len(line) <= 60 for line in size_table(points, width=60).splitlines())


def test_write_size_csv(tmp_path):
    points = run(("naive", "tiled"), sizes=(16,), labels=("opencl",))
    path = write_size_csv(points, tmp_path)
    assert path == tmp_path / "sizes.csv"
    rows = list(csv.DictReader(path.open()))
    assert [r["variant"] for r in rows] == ["naive", "tiled"]
    assert float(rows[1]["speedup_vs_naive"]) == pytest.approx(2.0)
    assert rows[0]["speedup_vs_naive"] == ""


def test_select_keeps_what_each_filter_names():
    points = [*run(), point("tiled", 16, tile=8, dtype="float64", op="rmm", label="opencl:pocl")]
    assert {p.variant for p in select(points, variants="naive,tiled")} == {"naive", "tiled"}
    ladder = {p.variant for p in select(points, variants="ladder")}
    assert ladder and not ladder & {"naive", "tiled", "vendor"}
    assert len(select(points, variants="all")) == len(points)
    assert {p.label for p in select(points, backends="opencl")} == {"opencl", "opencl:pocl"}
    assert {p.label for p in select(points, backends="opencl:pocl")} == {"opencl:pocl"}
    assert {p.tile for p in select(points, tiles="8")} == {8}
    assert {p.variant for p in select(points, tiles="none")} == {"vendor"}
    assert len(select(points, ops="rmm", dtypes="float64")) == 1


def test_a_filter_that_leaves_nothing_names_the_values_present():
    with pytest.raises(ValueError, match=r"--variants nope matches no point; present: naive, "):
        select(run(("naive", "tiled")), variants="nope")
    with pytest.raises(ValueError, match=r"--dtype int8 .* present: float32$"):
        select(run(("naive",)), dtypes="int8")


def _sampled(p, noise, flags=(), stop="noise"):
    """``p`` as a newer run records it: with its noise, why sampling stopped, its flags."""
    return dataclasses.replace(
        p, kernel_s={**(p.kernel_s or {}), "noise": noise}, stop=stop, flags=list(flags)
    )


def test_rows_carry_the_noise_the_stop_and_the_flags():
    naive, tiled = run(("naive", "tiled"), sizes=(16,), labels=("opencl",))
    rows = size_rows([_sampled(naive, 0.034, ["noisy"], "stable"), tiled])
    assert rows[0]["kernel_noise"] == pytest.approx(0.034)
    assert rows[0]["stop"] == "stable" and rows[0]["flags"] == "noisy"
    assert rows[1]["kernel_noise"] is None and rows[1]["stop"] == "" and rows[1]["flags"] == ""
    table = size_table([_sampled(naive, 0.034, ["noisy"]), _sampled(tiled, 0.004)])
    assert "noise" in table.splitlines()[1]
    assert "3.4%!" in table and "0.4%" in table and "0.4%!" not in table
    assert "—" in size_table([naive, tiled]).splitlines()[3]  # older files: no noise


def test_an_untrusted_point_is_listed_with_its_flag_but_gives_no_speedup():
    naive, tiled = run(("naive", "tiled"), sizes=(16,), labels=("opencl",))
    impossible = _sampled(tiled, 0.01, ["above-peak-compute"])
    rows = size_rows([naive, impossible])
    assert rows[1]["kernel_median_s"] == pytest.approx(16e-6)
    assert rows[1]["speedup_vs_naive"] is None
    assert "ok (above-peak-compute)" in size_table([naive, impossible])
    no_partner = size_rows([_sampled(naive, 0.01, ["above-peak-bandwidth"]), tiled])
    assert no_partner[1]["speedup_vs_naive"] is None


def test_the_csv_has_the_noise_the_stop_and_the_flags(tmp_path):
    naive, tiled = run(("naive", "tiled"), sizes=(16,), labels=("opencl",))
    path = write_size_csv([_sampled(naive, 0.034, ["noisy"], "stable"), tiled], tmp_path)
    rows = list(csv.DictReader(path.open()))
    assert float(rows[0]["kernel_noise"]) == pytest.approx(0.034)
    assert (rows[0]["stop"], rows[0]["flags"]) == ("stable", "noisy")
    assert (rows[1]["kernel_noise"], rows[1]["stop"], rows[1]["flags"]) == ("", "", "")
