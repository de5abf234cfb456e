"""The report: every experiment gets its section, tables and figures, from synthetic results.

The results are written as JSON lines, with times from a simple model (flops over
a rate per variant and tile), so every number the report shows can be computed
here and compared; nothing is compared with a stored output.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest

from xbackend.measuring.timing import format_seconds
from xbackend.report.document import APPENDIX
from xbackend.report.page import FIGURES_DIR, write_report
from xbackend.report.points import experiment_of
from xbackend.results import PointRecord, RunHeader
from xbackend.results.plan import Plan

# One worker runs this file's tests (pytest-xdist): its module fixture
# (report) is made once.
pytestmark = pytest.mark.xdist_group("test_report")

# Flops per second of each (variant, tile) in the synthetic results.
RATES = {("naive", 16): 1e9, ("tiled", 16): 4e9, ("tiled", 8): 2e9, ("naive", None): 5e8}
RATES |= {("vendor", None): 2e10, ("tiled", 64): 1e9, ("naive", 8): 1e9}
WRONG_DEVICE = "<b>GPU</b> & co"


def _stats(seconds: float) -> dict[str, float]:
    return {
        "n": 5,
        "median": seconds,
        "q1": seconds * 0.95,
        "q3": seconds * 1.05,
        "min": seconds * 0.9,
        "max": seconds * 1.1,
        "mean": seconds,
    }


def _seconds(variant: str, tile: int | None, M: int, K: int, N: int, batch: int = 1) -> float:
    return 2 * batch * M * K * N / RATES[(variant, tile)]


def _point(
    run_id: str,
    label: str,
    device: str,
    variant: str,
    tile: int | None,
    shape: tuple[int, int, int],
    *,
    op: str | None = "mm",
    batch: int | None = 1,
    dtype: str = "float32",
    status: str = "ok",
    scale: float = 1.0,
) -> dict[str, Any]:
    M, K, N = shape
    measured = status in ("ok", "mismatch")
    seconds = _seconds(variant, tile, M, K, N, batch or 1) * scale
    point: dict[str, Any] = {
        "type": "point",
        "run_id": run_id,
        "backend": label.split(":")[0],
        "label": label,
        "device": device,
        "variant": variant,
        "tile": tile,
        "dtype": dtype,
        "M": M,
        "K": K,
        "N": N,
        "flops": 2 * M * K * N * (batch or 1),
        "status": status,
        "reason": {"skipped": "predicted 40 s", "error": "compile error"}.get(status, ""),
        "equal": {"ok": True, "mismatch": False}.get(status),
        "max_abs_error": (3e-6 if status == "ok" else 0.5) if measured else None,
        "bound_ratio": (0.01 if status == "ok" else 30.0) if measured else None,
        "kernel_s": _stats(seconds) if measured else None,
        "end_to_end_s": _stats(seconds * 3) if measured else None,
        "kernel_samples_s": [seconds] * 5 if measured else [],
        "end_to_end_samples_s": [seconds * 3] * 5 if measured else [],
        "gflops": 2 * M * K * N * (batch or 1) / seconds / 1e9 if measured else None,
        "timestamp": "2026-11-22T01:00:00+00:00",
    }
    if op is not None:  # older files have neither op nor batch
        point["op"] = op
    if batch is not None:
        point["batch"] = batch
    return point


def _device(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "vendor": "Vendor",
        "kind": "gpu",
        "platform": "Platform",
        "driver_version": "580.1",
        "runtime_version": "13.0",
        "global_mem_bytes": 80 * 2**30,
        "compute_units": 132,
        "local_mem_bytes": 48 * 2**10,
        "cache_bytes": None,
        "max_work_group_size": 1024,
        "extra": {},
    }


def _run(
    run_id: str, shapes: list[tuple[int, int, int]], devices: dict[str, str], **plan: Any
) -> dict[str, Any]:
    return {
        "type": "run",
        "run_id": run_id,
        "timestamp": "2026-11-22T01:00:00+00:00",
        "environment": {
            "xbackend": "0.1.0",
            "host": "testhost",
            "os": "Linux",
            "cpu": "Test CPU",
            "cpu_count": 4,
            "python": "3.12.0",
            "packages": {"numpy": "2.0"},
            "command": f"xbackend compare --run {run_id}",
            "git_commit": f"commit-of-{run_id}",
            "git_dirty": False,
        },
        "plan": {"shapes": [list(shape) for shape in shapes], "seed": 0, **plan},
        "devices": {label: _device(name) for label, name in devices.items()},
    }


def _write(folder: Path, lines: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True)
    (folder / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return folder


ASSIGNMENT = [(16 * i, 14 * i, 16 * i) for i in range(1, 5)]
LAB = [(n, n, n) for n in (64, 128, 256)]
CHAPTER = [(n, n, n) for n in (128, 512, 2048)]
BLOG_DTYPES = ("int32", "float32", "float64")
BLOG_FLAGGED = {("mm", "float64", "tiled"): "mismatch", ("bmm", "int32", "naive"): "skipped"}


def _old_assignment(folder: Path) -> Path:
    """A results file from before presets, ops and batches."""
    run = _run("old", ASSIGNMENT, {"cpu": "Test CPU"})
    lines = [run]
    for shape in ASSIGNMENT:
        for variant, tile in (("naive", None), ("tiled", 64), ("vendor", None)):
            lines.append(
                _point("old", "cpu", "Test CPU", variant, tile, shape, op=None, batch=None)
            )
    return _write(folder, lines)


def _new_runs(folder: Path) -> Path:
    lines: list[dict[str, Any]] = []
    # Lab: a tiled T=16 result at 128 is wrong, a naive one at 256 failed.
    lines.append(_run("lab", LAB, {"opencl": "Test GPU"}, preset="lab", op="mm"))
    for shape in LAB:
        for variant, tile in (("naive", 16), ("tiled", 16), ("tiled", 8)):
            status = "ok"
            if (variant, tile, shape[0]) == ("tiled", 16, 128):
                status = "mismatch"
            lines.append(_point("lab", "opencl", "Test GPU", variant, tile, shape, status=status))
    lines.append(_point("lab", "opencl", "Test GPU", "naive", 8, LAB[-1], status="error"))
    # Chapter, without a preset: rmm says it. The naive kernel is skipped at 2048.
    lines.append(_run("chapter", CHAPTER, {"cuda": "Test GPU"}, preset=None, op="rmm"))
    for shape in CHAPTER:
        lines.append(_point("chapter", "cuda", "Test GPU", "tiled", 16, shape, op="rmm"))
        status = "skipped" if shape[0] == 2048 else "ok"
        lines.append(
            _point("chapter", "cuda", "Test GPU", "naive", 16, shape, op="rmm", status=status)
        )
    # Blog: mm and bmm at one size, three data types, on a device with an unsafe name.
    blog = (64, 64, 64)
    blog_plan = {"preset": "blog", "dtypes": list(BLOG_DTYPES), "ops": ["mm", "bmm"], "batch": 4}
    lines.append(_run("blog", [blog], {"cuda": WRONG_DEVICE}, **blog_plan))
    for op, batch in (("mm", 1), ("bmm", 4)):
        for dtype in BLOG_DTYPES:
            for variant in ("naive", "tiled"):
                status = BLOG_FLAGGED.get((op, dtype, variant), "ok")
                kind: dict[str, Any] = {"op": op, "batch": batch, "dtype": dtype, "status": status}
                lines.append(_point("blog", "cuda", WRONG_DEVICE, variant, 16, blog, **kind))
    # Other: sizes no experiment has; measured twice, the second time counts.
    lines.append(_run("other", [(100, 60, 30)], {"cpu": "Test CPU"}, preset=None, op="mm"))
    for scale in (10.0, 1.0):
        lines.append(_point("other", "cpu", "Test CPU", "vendor", None, (100, 60, 30), scale=scale))
    return _write(folder, lines)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("report")
    sources = [_old_assignment(root / "old"), _new_runs(root / "new") / "results.jsonl"]
    out = root / "out"
    written = write_report(sources, out)
    return {
        "out": out,
        "written": written,
        "html": (out / "report.html").read_text(encoding="utf-8"),
        "md": (out / "report.md").read_text(encoding="utf-8"),
    }


def _tables(markdown: str) -> list[list[list[str]]]:
    """Every Markdown table: rows of cells, the header first, the separator dropped."""
    tables: list[list[list[str]]] = []
    previous = False
    for line in markdown.splitlines():
        is_row = line.startswith("|")
        if is_row:
            cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
            if not all(re.fullmatch(r":?-+:?", cell) for cell in cells):
                if not previous:
                    tables.append([])
                tables[-1].append(cells)
        previous = is_row
    return tables


def _table(markdown: str, *header: str) -> list[list[str]]:
    """The one table whose header starts with ``header``."""
    found = [t for t in _tables(markdown) if t[0][: len(header)] == list(header)]
    assert len(found) == 1, [t[0] for t in _tables(markdown)]
    return found[0]


def _section(markdown: str, title_start: str) -> str:
    """A level-2 section of the Markdown, up to the next level-2 heading, followed by the
    parts of the appendix its folds point to (Markdown cannot fold: they come last)."""
    start = markdown.index(f"\n## {title_start}")
    end = markdown.find("\n## ", start + 1)
    section = markdown[start : end if end > 0 else None]
    return section + "".join(_folded(markdown, section))


_POINTER = ": in the appendix, at the end."


def _folded(markdown: str, section: str) -> list[str]:
    """The appendix's parts that the lines of ``section`` point to, in their order."""
    assert markdown.count(f"\n## {APPENDIX}\n") == (_POINTER in markdown)
    appendix = markdown.split(f"\n## {APPENDIX}\n", 1)[-1]
    parts = {part.split("\n", 1)[0]: part for part in ("\n" + appendix).split("\n### ")[1:]}
    pointed = [line[: -len(_POINTER)] for line in section.splitlines() if line.endswith(_POINTER)]
    return ["\n### " + parts[summary] for summary in pointed]


@pytest.mark.slow
def test_writes_the_page_the_markdown_and_the_figures(report):
    out = report["out"]
    written = report["written"]
    assert written[:2] == [out / "report.html", out / "report.md"]
    assert all(path.is_file() for path in written)
    assert all(path.is_relative_to(out / FIGURES_DIR) for path in written[2:])
    assert {path.suffix for path in written[2:]} == {".png", ".svg", ".csv"}
    # The whole table per size, beside its figures: the report's own, not the run's.
    assert [path.name for path in written if path.suffix == ".csv"] == ["sizes.csv"]


def test_html_is_self_contained(report):
    page = report["html"]
    images = re.findall(r'<img src="([^"]*)"', page)
    assert images and all(src.startswith("data:image/png;base64,") for src in images)
    assert 'src="report_figures' not in page
    assert "<link" not in page and "<script" not in page
    # Every figure of the Markdown is embedded in the page.
    assert len(images) == len(re.findall(r"!\[[^\]]*\]\(([^)]+)\)", report["md"]))


def test_markdown_refers_to_existing_pngs(report):
    targets = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", report["md"])
    assert targets
    for target in targets:
        assert target.startswith(f"{FIGURES_DIR}/") and target.endswith(".png")
        assert (report["out"] / target).is_file()


def test_every_experiment_has_its_section_in_order(report):
    titles = ["Assignment", "Lab", "Chapter", "Blog", "Other", "Code equality", "Machines"]
    positions = [report["md"].index(f"\n## {title}") for title in titles]
    assert positions == sorted(positions)
    for title in titles:
        assert re.search(rf"<h2 id=\"[^\"]*\">{title}", report["html"])


def test_old_assignment_results_get_the_generic_figures(report):
    section = _section(report["md"], "Assignment")
    for name in ("runtime_by_backend", "runtime_all", "gflops"):
        assert f"({FIGURES_DIR}/assignment/{name}.png)" in section


def test_lab_speedup_table_and_figure(report):
    section = _section(report["md"], "Lab")
    assert f"({FIGURES_DIR}/lab/speedup.png)" in section
    assert f"({FIGURES_DIR}/lab/runtime_by_backend.png)" in section
    table = _table(section, "N")
    assert table[0] == ["N", "opencl T=8", "opencl T=16"]
    assert [row[0] for row in table[1:]] == [str(n) for n, _, _ in LAB]
    for row in table[1:]:
        n = int(row[0])
        # T=8 has no naive partner of its own: the only naive kernel (T=16) is used.
        for cell, tile in ((row[1], 8), (row[2], 16)):
            expected = _seconds("naive", 16, n, n, n) / _seconds("tiled", tile, n, n, n)
            if (tile, n) == (16, 128):
                assert cell.startswith("**WRONG**")
                cell = cell.removeprefix("**WRONG**")
            assert float(cell.strip().rstrip("×")) == pytest.approx(expected, rel=6e-3)


def test_chapter_table_and_figure(report):
    section = _section(report["md"], "Chapter")
    assert f"({FIGURES_DIR}/chapter/rmm_time_float32.png)" in section
    table = _table(section, "N")
    assert table[0] == ["N", "cuda naive T=16 (ms)", "cuda tiled T=16 (ms)"]
    assert [row[0] for row in table[1:]] == [str(n) for n, _, _ in CHAPTER]
    for row in table[1:]:
        n = int(row[0])
        if n == 2048:
            assert row[1] == "skipped"
        else:
            ms = _seconds("naive", 16, n, n, n) * 1e3
            assert float(row[1]) == pytest.approx(ms, rel=6e-3)
        assert float(row[2]) == pytest.approx(_seconds("tiled", 16, n, n, n) * 1e3, rel=6e-3)


def test_blog_tables_and_bar_charts_for_mm_and_bmm(report):
    section = _section(report["md"], "Blog")
    for op, batch in (("mm", 1), ("bmm", 4)):
        start = section.index(f"### {op}, ")
        end = section.find("### ", start + 1)
        part = section[start : end if end > 0 else None]
        assert f"({FIGURES_DIR}/blog/latency_{op}_{batch}x64x64x64.png)" in part
        table = _table(part, "dtype")
        assert table[0] == ["dtype", "cuda naive T=16 (ms)", "cuda tiled T=16 (ms)"]
        assert [row[0] for row in table[1:]] == list(BLOG_DTYPES)
        for row in table[1:]:
            for cell, variant in ((row[1], "naive"), (row[2], "tiled")):
                status = BLOG_FLAGGED.get((op, row[0], variant), "ok")
                if status == "skipped":
                    assert cell == "skipped"
                    continue
                if status == "mismatch":  # shown, but never as a valid time
                    assert cell.startswith("**WRONG** ")
                    cell = cell.removeprefix("**WRONG** ")
                ms = _seconds(variant, 16, 64, 64, 64, batch) * 1e3
                assert float(cell) == pytest.approx(ms, rel=6e-3)


def test_other_points_get_the_generic_figures_and_the_last_measurement(report):
    section = _section(report["md"], "Other")
    assert f"({FIGURES_DIR}/other/runtime_all.png)" in section
    log = _section(report["md"], "Code equality")
    lines = [line for line in log.splitlines() if "100×60·60×30" in line]
    assert len(lines) == 1
    assert lines[0].endswith(f"kernel {format_seconds(_seconds('vendor', None, 100, 60, 30))}")


def test_wrong_results_and_errors_are_flagged_in_both(report):
    md, page = report["md"], report["html"]
    equality = _table(_section(md, "Code equality"), "experiment")
    lab = next(row for row in equality if row[0] == "lab")
    # Ten points: nine measured with one wrong, and one error.
    assert lab[1:5] == ["**WRONG** 8/10", "**WRONG** 1", "**ERROR** 1", "0"]
    chapter = next(row for row in equality if row[0] == "chapter")
    assert chapter[1:5] == ["5/5", "0", "0", "1"]
    assert re.search(r"^- \*\*WRONG\*\* opencl mm tiled T=16 float32 128×", md, re.M)
    assert re.search(r"^- \*\*ERROR\*\* opencl mm naive T=8 .*compile error", md, re.M)
    assert re.search(r"^WRONG +opencl mm tiled T=16 float32 128×", md, re.M)  # in the log
    assert re.search(r'<li class="wrong">WRONG opencl mm tiled T=16', page)
    assert re.search(r'<li class="error">ERROR opencl mm naive T=8 .*compile error', page)
    assert re.search(r'<span class="wrong">WRONG +opencl mm tiled T=16', page)  # in the log
    assert "<details><summary>lab: every point (10)</summary>" in page
    assert "```\n" in _section(md, "Code equality")


def test_text_from_the_results_is_escaped(report):
    assert html.escape(WRONG_DEVICE) in report["html"]
    assert WRONG_DEVICE not in report["html"]
    assert "<b>" not in report["md"]
    assert html.escape(WRONG_DEVICE, quote=False) in report["md"]


def test_machines_name_every_run_and_device(report):
    section = _section(report["md"], "Machines")
    for run_id in ("old", "lab", "chapter", "blog", "other"):
        assert f"### Run {run_id}, 2026-11-22T01:00:00+00:00" in section
        assert f"commit-of-{run_id}" in section
        assert f"xbackend compare --run {run_id}" in section
    devices = [t for t in _tables(section) if t[0][0] == "device"]
    assert len(devices) == 5
    lab = ["opencl", "Test GPU", "Platform", "580.1 / 13.0", "80.0 GiB", "132", "48.0 KiB"]
    assert devices[1][1] == lab


def test_machines_name_the_operations_each_run_ran(report):
    """Plans name their operations ``ops`` (older ones ``op``, older still none: mm)."""
    section = _section(report["md"], "Machines")
    runs = section.split("\n### Run ")[1:]
    expected = {"old": "mm", "lab": "mm", "chapter": "rmm", "blog": "mm, bmm ×4", "other": "mm"}
    for run in runs:
        run_id = run.split(",")[0]
        settings = dict(row[:2] for row in _table(run, "setting", "value")[1:])
        assert settings["operations"] == expected[run_id], run_id


@pytest.mark.parametrize(
    ("plan", "point", "expected"),
    [
        ({"shapes": [[16, 14, 16], [32, 28, 32]]}, {}, "assignment"),
        ({"shapes": [[64, 64, 64], [128, 128, 128]]}, {}, "lab"),
        ({"shapes": [[256, 256, 256], [768, 768, 768]]}, {}, "other"),
        ({"shapes": [[1024, 1024, 1024]], "dtypes": ["float32", "int32"]}, {}, "blog"),
        ({"shapes": [[64, 64, 64], [128, 128, 128]], "dtypes": ["float64"]}, {}, "lab"),
        ({"shapes": [[128, 128, 128]]}, {"op": "rmm"}, "chapter"),
        ({"shapes": [[64, 64, 64]]}, {"op": "bmm"}, "blog"),
        ({"shapes": [[100, 100, 100]], "preset": "chapter"}, {}, "chapter"),
        ({"shapes": [[64, 64, 64]], "preset": "blog-latency"}, {}, "blog"),
        ({"shapes": [[16, 14, 16]], "preset": "collaboration"}, {}, "assignment"),
    ],
)
def test_experiment_from_preset_or_op_and_sizes(plan, point, expected):
    runs = {"r": RunHeader.from_dict({"run_id": "r", "plan": plan})}
    shape = plan["shapes"][0]
    fields = {"run_id": "r", "status": "skipped", **point}
    found = PointRecord.from_dict(_point("r", "cpu", "CPU", "naive", None, tuple(shape)) | fields)
    assert experiment_of(found, runs) == expected


def test_a_point_without_its_run_header_is_classified_by_its_own_size():
    point = _point("gone", "cpu", "CPU", "naive", None, (48, 42, 48), status="skipped")
    assert experiment_of(PointRecord.from_dict(point), {}) == "assignment"


@pytest.mark.slow
def test_experiments_do_not_replace_each_others_points(tmp_path):
    """The lab and the blog both measure 1024³ mm: each keeps its own point."""
    from xbackend.results import ResultsWriter

    def write(folder: Path, preset: str, median_s: float) -> None:
        folder.mkdir()  # the writer writes into a folder, it does not make one
        with ResultsWriter(folder) as writer:
            writer.write_run(RunHeader(preset, plan=Plan(shapes=[], preset=preset, ops=["mm"])))
            for variant in ("naive", "tiled"):
                stats = {key: median_s * (2 if variant == "naive" else 1)
                         for key in ("median", "q1", "q3", "min", "max", "mean")}  # fmt: skip
                writer.append(PointRecord(
                    run_id=preset, backend="cuda", label="cuda", device="GPU", variant=variant,
                    tile=16, dtype="float32", M=1024, K=1024, N=1024, flops=2 * 1024**3,
                    status="ok", equal=True, max_abs_error=0.0, bound_ratio=0.0,
                    kernel_s={**stats, "n": 3}, end_to_end_s={**stats, "n": 3}, gflops=1.0,
                ))  # fmt: skip

    write(tmp_path / "lab", "lab", 0.001)
    write(tmp_path / "blog", "blog", 0.003)
    write_report([tmp_path / "lab", tmp_path / "blog"], tmp_path / "out")
    markdown = (tmp_path / "out" / "report.md").read_text()
    lab = markdown.split("## Lab")[1].split("## ")[0]
    assert "| 1024 | 2.00× |" in lab, lab


@pytest.mark.slow
def test_noise_flags_and_untrusted_times_in_the_tables_and_not_in_figures_or_speedups(tmp_path):
    """A newer run: each point with its noise; one tiled time above the device's peak."""
    lines: list[dict[str, Any]] = [_run("new", ASSIGNMENT[:2], {"cpu": "Test CPU"})]
    for shape in ASSIGNMENT[:2]:
        for variant, tile in (("naive", None), ("tiled", 64)):
            point = _point("new", "cpu", "Test CPU", variant, tile, shape)
            point["kernel_s"]["noise"] = 0.034 if variant == "naive" else 0.004
            point["flags"] = ["noisy"] if variant == "naive" else []
            point["cache"] = "cold"
            if (variant, shape) == ("tiled", ASSIGNMENT[1]):
                point["flags"] = ["above-peak-compute"]
            lines.append(point)
    out = tmp_path / "out"
    write_report([_write(tmp_path / "new", lines)], out)
    markdown = (out / "report.md").read_text(encoding="utf-8")
    table = _table(_section(markdown, "Assignment"), "size", "backend")
    assert table[0][8] == "noise"
    noise = {(row[0], row[3]): row[8] for row in table[1:]}
    assert set(noise.values()) == {"3.4%\\~", "0.4%"}  # the Markdown escapes the ~
    untrusted = [row for row in table[1:] if row[6].startswith("**UNTRUSTED**")]
    assert len(untrusted) == 1 and untrusted[0][3] == "tiled" and untrusted[0][-1] == ""
    trusted_tiled = [row for row in table[1:] if row[3] == "tiled" and row not in untrusted]
    assert trusted_tiled[0][-1].endswith("×")  # its speed-up stays
    assert "[above-peak-compute]" in _section(markdown, "Code equality")
    figure = next((out / FIGURES_DIR / "assignment").glob("runtime_all.svg")).read_text()
    assert "cache: cold" in figure
