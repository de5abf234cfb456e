"""``xbackend diff`` on energy: where both runs read a point's joules per product, their
ratio B/A and whether it moved past the fixed tolerance (MORE, LESS) or not (WITHIN);
nothing where either run has no reading; the terminal's line, the table's columns and
diff.csv say it."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from xbackend.analysis import diff, joules
from xbackend.cli import main
from xbackend.measuring.timing import Stats
from xbackend.results import PointRecord, RunHeader

SEED = 20261128
VARIANTS = ("naive", "tiled", "vendor")
SIZES = (64, 128, 256)
SAMPLES = 20


def _point(rng: np.random.Generator, variant: str, n: int, joules_per_product: float | None):
    seconds = 1e-9 * n**2 * (4 if variant == "naive" else 1)
    samples = [float(s) for s in seconds * rng.lognormal(0.0, 0.02, SAMPLES)]
    stats = Stats.of(samples).to_dict()
    state = None
    if joules_per_product is not None:
        state = {"energy": {"joules_per_product": joules_per_product, "watts": 300.0,
                            "window_s": 1.0, "products": 1000}}  # fmt: skip
    return PointRecord(
        run_id="r", backend="cuda", label="cuda", device="Test GPU", variant=variant,
        tile=None if variant == "vendor" else 16, dtype="float32", M=n, K=n, N=n,
        flops=2 * n**3, status="ok", kernel_s=stats, end_to_end_s=stats,
        kernel_samples_s=samples, end_to_end_samples_s=samples, state=state,
    )  # fmt: skip


MORE_AT, LESS_AT = ("tiled", 128), ("naive", 256)


def _runs(seed: int = SEED) -> tuple[list[PointRecord], list[PointRecord]]:
    """A and B: the same points, B's joules within ±3% of A's (seeded) but one 30% more
    and one 25% fewer."""
    rng = np.random.default_rng(seed)
    a, b = [], []
    for variant in VARIANTS:
        for n in SIZES:
            reading = float(rng.uniform(1e-4, 1e-1))
            factor = float(rng.uniform(0.97, 1.03))
            if (variant, n) == MORE_AT:
                factor = 1.30
            elif (variant, n) == LESS_AT:
                factor = 0.75
            a.append(_point(rng, variant, n, reading))
            b.append(_point(rng, variant, n, reading * factor))
    return a, b


def _by(comparisons: list[diff.Comparison]) -> dict[tuple[str, int], diff.Comparison]:
    return {(c.key.variant, c.key.M): c for c in comparisons}


def test_a_moved_joules_value_is_flagged_and_an_unmoved_one_is_not():
    a, b = _runs()
    found = _by(diff.compare_points(a, b))
    for key, comparison in found.items():
        change = comparison.energy
        assert change is not None
        a_point = next(p for p in a if (p.variant, p.M) == key)
        b_point = next(p for p in b if (p.variant, p.M) == key)
        expected = joules.joules(b_point) / joules.joules(a_point)  # type: ignore[operator]
        assert change.ratio == pytest.approx(expected, rel=1e-12)
        if key == MORE_AT:
            assert change.verdict == joules.MORE and change.moved
        elif key == LESS_AT:
            assert change.verdict == joules.LESS and change.moved
        else:
            assert change.verdict == joules.WITHIN and not change.moved
    assert joules.counts(c.energy for c in found.values()) == {"MORE": 1, "LESS": 1, "WITHIN": 7}


def test_the_tolerance_decides_and_is_symmetric_as_a_ratio():
    a, b = _runs()
    wide = _by(diff.compare_points(a, b, energy_tolerance=0.5))
    assert all(c.energy is not None and not c.energy.moved for c in wide.values())
    # 1/1.1 is as far below 1 as 1.1 above: LESS only below it.
    assert joules.EnergyChange(1.0, 0.92, 0.10).verdict == joules.WITHIN
    assert joules.EnergyChange(1.0, 0.90, 0.10).verdict == joules.LESS
    with pytest.raises(ValueError, match="energy tolerance"):
        diff.compare_points(a, b, energy_tolerance=-0.1)


def test_no_comparison_where_either_run_has_no_reading_or_a_point_is_untrusted():
    a, b = _runs()
    b[0] = dataclasses.replace(b[0], state={"energy": {"unread": "no counter"}})
    b[1] = dataclasses.replace(b[1], state=None)
    a[2] = dataclasses.replace(a[2], flags=["above-peak-compute"])
    b[3] = dataclasses.replace(b[3], state={"energy": {"joules_per_product": "1.0"}})  # hostile
    found = diff.compare_points(a, b)
    none = {(c.key.variant, c.key.M) for c in found if c.energy is None}
    assert none == {(p.variant, p.M) for p in (a[0], a[1], a[2], a[3])}
    assert all(diff.row(c)["energy"] is None for c in found if c.energy is None)


def _write(folder: Path, points: list[PointRecord]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    header = RunHeader(run_id="r", environment={"host": "testhost"})
    lines = [header.to_dict(), *(p.to_dict() for p in points)]
    (folder / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return folder


def test_the_command_prints_and_writes_the_energy_comparison(tmp_path, capsys):
    a, b = _runs()
    code = main(["diff", str(_write(tmp_path / "a", a)), str(_write(tmp_path / "b", b)),
                 "--out", str(tmp_path / "out"), "--no-plots"])  # fmt: skip
    assert code == 0
    out = capsys.readouterr().out
    assert "energy (joules per product B/A, tolerance ±10%: fixed, no A/A floor" in out
    assert "1 MORE, 1 LESS, 7 WITHIN" in out
    header = out.splitlines()[0]
    assert "J B/A" in header and "energy" in header
    with (tmp_path / "out" / "diff.csv").open() as handle:
        rows = {(r["variant"], int(r["M"])): r for r in csv.DictReader(handle)}
    assert rows[MORE_AT]["energy"] == "MORE" and rows[LESS_AT]["energy"] == "LESS"
    assert float(rows[MORE_AT]["joules_ratio"]) == pytest.approx(1.30)
    reading = next(p for p in a if (p.variant, p.M) == MORE_AT)
    assert float(rows[MORE_AT]["a_joules"]) == pytest.approx(joules.joules(reading))
    assert {r["energy"] for key, r in rows.items() if key not in (MORE_AT, LESS_AT)} == {"WITHIN"}


def test_runs_without_energy_show_no_energy_column_nor_line(tmp_path, capsys):
    a, b = _runs()
    a = [dataclasses.replace(p, state=None) for p in a]
    b = [dataclasses.replace(p, state=None) for p in b]
    code = main(["diff", str(_write(tmp_path / "a", a)), str(_write(tmp_path / "b", b)),
                 "--out", str(tmp_path / "out"), "--no-plots"])  # fmt: skip
    assert code == 0
    out = capsys.readouterr().out
    assert "J B/A" not in out and "energy (joules" not in out


def test_a_bad_energy_tolerance_is_a_usage_error(tmp_path):
    with pytest.raises(SystemExit) as refused:
        main(["diff", str(tmp_path), str(tmp_path), "--energy-tolerance", "-5%"])
    assert refused.value.code == 2
