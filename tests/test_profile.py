"""``xbackend profile`` without a GPU: ncu's CSV (captured on an H100, ``tests/data``),
its units, the matching of its kernels to the points, the records, the figures, the
one-line refusals, and the command end to end with a stand-in for ncu
(``tests/fake_ncu.sh``) that runs the profiled child on the CPU backend."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from matplotlib.patches import Rectangle

from xbackend.cli import main
from xbackend.measuring.timing import Sampling
from xbackend.operations import Shape
from xbackend.profiling import needs
from xbackend.profiling.child import Spec
from xbackend.profiling.child import main as child_main
from xbackend.profiling.launches import HOLD_KERNEL, Entry, Manifest, match, records, runs
from xbackend.profiling.metrics import (
    COUNTERS,
    DURATION,
    LOAD_REQUESTS,
    METRICS,
    OCCUPANCY,
    combined,
    fall,
)
from xbackend.profiling.ncu import ProfileError, Settings, parse_csv, scale, to_base
from xbackend.profiling.table import CSV_NAME, table
from xbackend.pytest_plugin import needs_backend
from xbackend.results import PointRecord, RecordError, load
from xbackend.results.plan import Plan
from xbackend.results.records import PROFILER_CLOCK

DATA = Path(__file__).resolve().parent / "data"
STUDENT = Path(__file__).resolve().parent.parent / "examples" / "assignment" / "student"
FAKE_NCU = Path(__file__).resolve().parent / "fake_ncu.sh"
RAW_BASE = DATA / "ncu_raw_base_512.csv"  # --page raw --print-units base
RAW_AUTO = DATA / "ncu_raw_auto_512.csv"  # --page raw, ncu's automatic units
DETAILS = DATA / "ncu_details_512.csv"  # --page details
MANIFEST = DATA / "ncu_manifest_512.json"  # the child's manifest of that profile


def _rows(path: Path = RAW_BASE):
    return parse_csv(path.read_text(encoding="utf-8"))


def _profiled() -> list[tuple[PointRecord, list[str]]]:
    return records(_rows(), Manifest.read(MANIFEST), Settings())


# -- ncu's CSV -------------------------------------------------------------------------------


def test_the_raw_page_reads_as_kernels_in_launch_order():
    rows = _rows()
    manifest = Manifest.read(MANIFEST)
    assert [row.id for row in rows] == sorted(row.id for row in rows)
    # A hold opens each product's run, then the kernel its variant launches.
    expected = [name for entry in manifest.entries for name in (HOLD_KERNEL, entry.kernel)]
    assert [row.function for row in rows] == expected
    for row in rows:
        assert set(row.metrics) == set(METRICS)  # the device's attributes are left out
        assert all(math.isfinite(value) and value >= 0 for value in row.metrics.values())


@pytest.mark.parametrize("other", [RAW_AUTO, DETAILS], ids=["auto-units", "details-page"])
def test_every_page_and_unit_reads_the_same(other):
    """ncu printed one report three ways; in base units they agree to what each printed
    (the details page rounds to 3-4 digits, the raw page's percentages to 2 decimals)."""
    tolerance = 5e-3
    base, same = _rows(), parse_csv(other.read_text(encoding="utf-8"))
    assert [(r.id, r.name) for r in same] == [(r.id, r.name) for r in base]
    for mine, theirs in zip(base, same, strict=True):
        assert set(theirs.metrics) == set(mine.metrics)
        for metric, value in mine.metrics.items():
            assert theirs.metrics[metric] == pytest.approx(value, rel=tolerance, abs=1e-9)


def test_units_convert_to_base_units():
    rng = np.random.default_rng(7)
    prefixes = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 1024.0}
    for number in rng.uniform(0, 5000, 20):
        text = f"{number:,.4f}"  # ncu writes thousands separators
        for prefix, factor in prefixes.items():
            for base in ("byte", "sector", "request", "warp"):
                assert to_base(text, prefix + base) == pytest.approx(round(number, 4) * factor)
        for unit, factor in (("nsecond", 1e-9), ("usecond", 1e-6), ("msecond", 1e-3),
                             ("ns", 1e-9), ("ms", 1e-3), ("second", 1.0)):  # fmt: skip
            assert to_base(text, unit) == pytest.approx(round(number, 4) * factor)
        assert to_base(text, "%") == pytest.approx(round(number, 4))
    assert to_base("n/a", "byte") is None and to_base("", "") is None
    assert scale("") == 1.0  # a count ncu prints without a unit
    for unit in ("furlong", "K", "byte/second"):
        with pytest.raises(ProfileError, match="unit"):
            scale(unit)
    with pytest.raises(ProfileError, match="number"):
        to_base("No-CC", "")


def test_a_csv_without_the_table_or_the_metrics_is_refused():
    with pytest.raises(ProfileError, match="no CSV table"):
        parse_csv("==PROF== Disconnected\n==WARNING== No kernels were profiled.\n")
    with pytest.raises(ProfileError, match="none of the metrics"):
        parse_csv(RAW_BASE.read_text(encoding="utf-8"), metrics=["sm__cycles_elapsed.sum"])


# -- kernels matched to points ---------------------------------------------------------------


def test_each_point_gets_the_kernels_of_its_run():
    profiled = _profiled()
    rows = [row for row in _rows() if row.function != HOLD_KERNEL]
    assert [kernels for _, kernels in profiled] == [[row.function] for row in rows]
    for (point, _), row in zip(profiled, rows, strict=True):
        assert point.status == "ok" and point.clock == PROFILER_CLOCK
        assert point.counters == row.metrics  # one kernel: its own counters, holds left out
        assert point.kernel_samples_s == [row.metrics[DURATION.metric]]
        assert point.end_to_end_s is None and point.cache == "cold"
        assert point.gflops == pytest.approx(point.flops / row.metrics[DURATION.metric] / 1e9)


def test_the_fall_of_the_loads_is_the_tile():
    points = [point for point, _ in _profiled()]
    tiled = [p for p in points if p.variant == "tiled"]
    assert len(tiled) == 3
    for point in tiled:
        assert fall(point, points, LOAD_REQUESTS) == pytest.approx(point.tile)
    assert all(fall(p, points, LOAD_REQUESTS) is None for p in points if p.variant == "naive")


def _dropped(rows, index: int):
    """The rows without the ``index``-th product's run (its hold and its kernels)."""
    cut = runs(rows)
    kept = [row for number, run in enumerate(cut) if number != index for row in run]
    holds = [row for row in rows if row.function == HOLD_KERNEL]
    return sorted([*kept, *(h for n, h in enumerate(holds) if n != index)], key=lambda r: r.id)


def test_a_run_too_few_or_too_many_is_an_error():
    rng = np.random.default_rng(11)
    rows, manifest = _rows(), Manifest.read(MANIFEST)
    index = int(rng.integers(len(manifest.entries)))
    with pytest.raises(ProfileError, match=r"5 product runs.*6 products"):
        match(_dropped(rows, index), manifest)
    fewer = dataclasses.replace(
        manifest,
        entries=[dataclasses.replace(e, ran=n != index) for n, e in enumerate(manifest.entries)],
    )
    with pytest.raises(ProfileError, match=r"6 product runs.*5 products"):
        match(rows, fewer)


def test_a_run_whose_first_kernel_is_not_its_variants_is_an_error():
    rng = np.random.default_rng(12)
    manifest = Manifest.read(MANIFEST)
    index = int(rng.integers(len(manifest.entries)))
    entries = list(manifest.entries)
    entries[index] = dataclasses.replace(entries[index], kernel="mm_warp")
    with pytest.raises(ProfileError, match="comes first"):
        match(_rows(), dataclasses.replace(manifest, entries=entries))
    stray = [dataclasses.replace(_rows()[1], id=-1), *_rows()]
    with pytest.raises(ProfileError, match="before any product's hold"):
        match(stray, manifest)


def test_a_product_of_several_kernels_adds_them_up():
    rng = np.random.default_rng(5)
    kernels = [{m: float(rng.uniform(1, 1e6)) for m in METRICS} for _ in range(3)]
    total = combined(kernels)
    times = [k[DURATION.metric] for k in kernels]
    for counter in COUNTERS:
        if counter.summed:
            assert total[counter.metric] == pytest.approx(sum(k[counter.metric] for k in kernels))
    weighted = sum(k[OCCUPANCY.metric] * t for k, t in zip(kernels, times, strict=True))
    assert total[OCCUPANCY.metric] == pytest.approx(weighted / sum(times))
    del kernels[1][LOAD_REQUESTS.metric]  # a counter one kernel lacks is no sum
    assert LOAD_REQUESTS.metric not in combined(kernels)


# -- records ---------------------------------------------------------------------------------


def test_profiled_records_round_trip():
    for point, _ in _profiled():
        again = PointRecord.from_dict(json.loads(json.dumps(point.to_dict())))
        assert again == point and again.counters == point.counters


def test_only_a_profiled_point_may_lack_an_end_to_end_time():
    point = _profiled()[0][0].to_dict()
    assert PointRecord.from_dict(point).end_to_end_s is None
    with pytest.raises(RecordError, match="end_to_end_s"):
        PointRecord.from_dict({**point, "clock": "cuda-events"})
    with pytest.raises(RecordError, match="counters"):
        PointRecord.from_dict({**point, "counters": {"dram__bytes_read.sum": "many"}})
    plain = {key: value for key, value in point.items() if key != "counters"}
    assert "counters" not in PointRecord.from_dict(plain).to_dict()  # files as before


def test_the_table_names_every_counter_and_the_fall():
    points = [point for point, _ in _profiled()]
    text = table(points)
    for counter in COUNTERS:
        assert counter.title in text
    tiled = [line for line in text.splitlines() if " tiled " in line]
    assert [line.split()[-1] for line in tiled] == [f"{p.tile}×" for p in points[3:]]


@pytest.mark.slow
def test_the_figures_are_written(tmp_path):
    from xbackend.figures.counters import figures
    from xbackend.figures.plots import save

    points = [point for point, _ in _profiled()]
    ladder = [dataclasses.replace(p, variant="vec4", tile=None) for p in points[-1:]]
    drawn = dict(figures([*points, *ladder]))
    assert set(drawn) == {
        "counters_mm_float32_512x512x512",
        "ladder_counters_mm_float32_512x512x512",
    }
    figure = drawn["counters_mm_float32_512x512x512"]
    bars = [a for axes in figure.axes for a in axes.patches if isinstance(a, Rectangle)]
    requests = [b for b in bars if str(b.get_gid()).startswith("bar:load_requests:")]
    assert len(requests) == 6 and [b.get_height() for b in requests] == [
        (p.counters or {})[LOAD_REQUESTS.metric] for p in points
    ]
    labels = [t.get_text() for axes in figure.axes for t in axes.texts]
    assert sum("÷" in label for label in labels) == 3  # the three tiled bars
    paths, png = save(figure, tmp_path, "counters")
    assert paths[0].read_bytes() == png and png.startswith(b"\x89PNG") and len(png) > 20_000


# -- refusals in one line --------------------------------------------------------------------


@pytest.mark.parametrize("asked", ["opencl", "cpu", "opencl:nvidia"])
def test_another_backend_is_one_line_and_exit_2(asked, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["profile", "--backends", asked, "--ncu", str(FAKE_NCU), "--out", str(out)])
    error = capsys.readouterr().err.splitlines()
    name = asked.split(":")[0]
    assert code == 2 and len(error) == 1 and not out.exists()
    assert error[0].startswith(f"xbackend profile: {name}: ")
    assert error[0].endswith("use --backends cuda") and "would need" in error[0]


def test_two_backends_are_two_lines(capsys):
    assert main(["profile", "--backends", "opencl,cpu,cuda", "--ncu", str(FAKE_NCU)]) == 2
    error = capsys.readouterr().err.splitlines()
    assert [line.split(":")[1].strip() for line in error] == ["opencl", "cpu"]


def test_no_ncu_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(needs, "cuda_problem", lambda: None)
    missing = tmp_path / "nowhere" / "ncu"
    assert main(["profile", "--ncu", str(missing), "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err.splitlines()
    assert len(error) == 1 and error[0].startswith("xbackend profile: ncu: ")
    assert str(missing) in error[0] and not (tmp_path / "out").exists()


def test_no_cuda_is_one_line(monkeypatch, capsys):
    class NoGPU:
        @classmethod
        def available(cls):
            return False, "the CUDA driver found no GPU"

    monkeypatch.setattr(needs, "backend_class", lambda name: NoGPU)
    assert main(["profile", "--ncu", str(FAKE_NCU)]) == 2
    error = capsys.readouterr().err.splitlines()
    assert error == [
        "xbackend profile: cuda: the CUDA driver found no GPU; "
        "a profile needs an NVIDIA GPU, its driver and pycuda"
    ]


# -- the child, and the command end to end ---------------------------------------------------


def _spec(
    tmp_path: Path, words: list[str], shape: Shape, ops=("mm",), targets=("cpu",), folders=()
) -> Path:
    plan = Plan(
        shapes=[shape],
        ops=list(ops),
        tiles=[8, 16],
        seed=4,
        sampling=Sampling(warmup=0, max_samples=1),
    )
    spec = Spec("r1", list(targets), plan, words, tmp_path / "manifest.json", list(folders))
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec.to_dict()))
    return path


def test_the_child_runs_each_point_once_and_says_so(tmp_path):
    assert child_main([str(_spec(tmp_path, ["tiled", "vendor"], Shape(20, 12, 28)))]) == 0
    manifest = Manifest.read(tmp_path / "manifest.json")
    assert manifest.finished and manifest.variants == ["tiled", "vendor"]
    points = [PointRecord.from_dict({**e.record, "status": "skipped"}) for e in manifest.entries]
    assert [(p.variant, p.tile) for p in points] == [("tiled", 8), ("tiled", 16), ("vendor", None)]
    assert all(e.ran and e.record["status"] == "ok" and e.record["equal"] for e in manifest.entries)
    assert "cpu" in manifest.devices and manifest.run_id == "r1"


def test_the_child_adds_the_kernel_folders_of_its_spec(tmp_path, own_families):
    """Issue 41: the parent's --kernels reach the child in its spec, not its environment:
    this process has added no folder, and the child runs the student's kernels; a folder
    that holds no family is the child's problem, named."""
    needs_backend("opencl")
    words, shape = ["student_naive", "student_tiled"], Shape(20, 12, 28)
    path = _spec(tmp_path, words, shape, targets=["opencl"], folders=[str(STUDENT)])
    assert child_main([str(path)]) == 0
    manifest = Manifest.read(tmp_path / "manifest.json")
    assert manifest.finished and manifest.variants == words
    ran = [(e.record["variant"], e.record["tile"]) for e in manifest.entries]
    assert ran == [(variant, tile) for variant in words for tile in (8, 16)]
    assert all(e.ran and e.record["equal"] for e in manifest.entries)
    (tmp_path / "empty").mkdir()
    empty = _spec(tmp_path, words, shape, targets=["opencl"], folders=[str(tmp_path / "empty")])
    assert child_main([str(empty)]) == 2
    assert "holds no family.toml" in Manifest.read(tmp_path / "manifest.json").problem


@pytest.mark.parametrize(
    ("words", "shape", "ops", "problem"),
    [
        (["tiled", "warpish"], Shape(8, 8, 8), ("mm",), "unknown variant"),
        (["naive"], Shape(7, 8, 8), ("rmm",), "even M and N"),
    ],
)
def test_the_child_refuses_a_plan_that_cannot_mean_what_it_says(
    tmp_path, capsys, words, shape, ops, problem
):
    assert child_main([str(_spec(tmp_path, words, shape, ops))]) == 2
    manifest = Manifest.read(tmp_path / "manifest.json")
    assert problem in manifest.problem and not manifest.entries and not manifest.finished
    assert problem in capsys.readouterr().err


def _tiled_runs_csv(path: Path) -> Path:
    """The fixture, cut to the runs of the tiled kernel (what a CPU child of --variants
    tiled --tile 8,16,32 runs: three products)."""
    lines = RAW_BASE.read_text(encoding="utf-8").splitlines()
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    name = rows[0].index("Kernel Name")
    body = rows[2:]
    keep = [
        row
        for number, row in enumerate(body)
        if row[name] == "mm_tiled" or body[number + 1][name] == "mm_tiled"
    ]
    text = io.StringIO()
    csv.writer(text, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows[:2] + keep)
    path.write_text(text.getvalue(), encoding="utf-8")
    return path


@pytest.fixture
def fake_ncu(tmp_path, monkeypatch):
    monkeypatch.setattr(needs, "cuda_problem", lambda: None)  # the child runs on the CPU
    monkeypatch.setenv("FAKE_NCU_CSV", str(_tiled_runs_csv(tmp_path / "fake.csv")))
    return str(FAKE_NCU)


@pytest.mark.slow
def test_profile_end_to_end(tmp_path, fake_ncu, capsys):
    out = tmp_path / "out"
    command = ["profile", "--ncu", fake_ncu, "--sizes", "24x16x20", "--variants", "tiled",
               "--tile", "8,16,32", "--out", str(out)]  # fmt: skip
    assert main(command) == 0
    printed = capsys.readouterr().out
    assert printed.count("profiled cpu mm tiled") == 3 and "requests ÷ naive" in printed
    loaded = load([out])
    (header,) = loaded.runs.values()
    profiler = header.environment["profiler"]
    assert profiler["version"] == "2099.1.0.0" and profiler["path"] == fake_ncu
    assert (profiler["clock_control"], profiler["cache_control"]) == ("none", "all")
    assert profiler["metrics"] == list(METRICS) and header.plan.sampling.cache == "cold"
    tiled = [row for row in _rows() if row.function == "mm_tiled"]
    assert [p.counters for p in loaded.points] == [row.metrics for row in tiled]
    assert [(p.tile, p.M, p.K, p.N, p.status) for p in loaded.points] == [
        (t, 24, 16, 20, "ok") for t in (8, 16, 32)
    ]
    with (out / CSV_NAME).open() as file:
        table_rows = list(csv.DictReader(file))
    assert [float(r["load_requests"]) for r in table_rows] == [
        row.metrics[LOAD_REQUESTS.metric] for row in tiled
    ]
    assert (out / "counters_mm_float32_24x16x20.png").stat().st_size > 10_000
    assert (out / "profile.ncu-rep").exists() and (out / "ncu.log").exists()
    # Every other reader of results takes the profiled points: a point has no end-to-end.
    assert main(["plot", str(out), "--out", str(tmp_path / "plots")]) == 0
    assert main(["report", str(out), "--out", str(tmp_path / "report")]) == 0
    report = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert "## Counters (Nsight Compute)" in report
    assert "Nsight Compute 2099.1.0.0, --clock-control none --cache-control all" in report
    assert (tmp_path / "report" / "report_figures" / "counters").is_dir()


def test_a_report_without_profiled_points_has_no_counters_section(tmp_path):
    from xbackend.report.counters import counters_section
    from xbackend.report.figures import FigureFolder

    plain = [dataclasses.replace(point, counters=None) for point, _ in _profiled()]
    assert counters_section(plain, FigureFolder(tmp_path), {}) == ([], [])
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_profile_records_the_cache_setting(tmp_path, fake_ncu):
    out = tmp_path / "out"
    command = ["profile", "--ncu", fake_ncu, "--sizes", "16x16", "--variants", "tiled",
               "--tile", "8,16,32", "--cache-control", "none", "--no-plots",
               "--out", str(out)]  # fmt: skip
    assert main(command) == 0
    loaded = load([out])
    (header,) = loaded.runs.values()
    assert header.environment["profiler"]["cache_control"] == "none"
    assert {p.cache for p in loaded.points} == {"warm"} and header.plan.sampling.cache == "warm"
    assert not list(out.glob("*.png"))


@pytest.mark.slow
def test_a_profile_whose_kernels_do_not_match_fails_and_says_why(tmp_path, fake_ncu, capsys):
    command = ["profile", "--ncu", fake_ncu, "--sizes", "16x16", "--variants", "tiled",
               "--tile", "8,16", "--out", str(tmp_path / "out")]  # fmt: skip
    assert main(command) == 2  # two products ran; ncu's CSV has three runs
    assert "3 product runs" in capsys.readouterr().err
    assert not (tmp_path / "out" / "results.jsonl").exists()


def test_an_entry_reads_back_as_written():
    entry = Entry({"label": "cuda", "variant": "tiled", "tile": 16, "M": 2, "K": 3, "N": 4,
                   "op": "mm"}, "mm_tiled", True)  # fmt: skip
    assert Entry.from_dict(json.loads(json.dumps(entry.to_dict()))) == entry
    assert entry.title == "cuda mm tiled T=16 2×3·3×4"


def test_counters_kept_from_users_is_one_line(tmp_path):
    from xbackend.profiling.session import PERMISSION_MESSAGE, _manifest

    log = ["==PROF== Connected to process 1", "==ERROR== ERR_NVGPUCTRPERM - The user does not"]
    with pytest.raises(ProfileError) as raised:
        _manifest(tmp_path / "missing.json", 1, log)
    assert str(raised.value) == PERMISSION_MESSAGE and "\n" not in PERMISSION_MESSAGE
    with pytest.raises(ProfileError, match=r"wrote no manifest.*exited with 3"):
        _manifest(tmp_path / "missing.json", 3, ["==ERROR== something else"])
