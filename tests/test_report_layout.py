"""The report of a run of many sizes, as a teacher reads it: a compact table of the key
sizes (named), the whole table folded away and written as sizes.csv, the machines folded
away with the kernel sources; and one set of ceilings per device (a device's name on its
host), whose shares above 100% are marked."""

from __future__ import annotations

import csv
import html
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from xbackend.analysis.roofs import roofs
from xbackend.report.page import write_report
from xbackend.results import RunHeader

SHAPES = [(16 * i, 14 * i, 16 * i) for i in range(1, 10)]  # the assignment's, 9 sizes
CONFIGS = (("cpu", "naive", None), ("cpu", "vendor", None), ("opencl", "tiled", 16))
CEILINGS = {
    "cpu": {"flops_per_s": {"float32": 40e9}, "bytes_per_s": 20e9},  # NumPy's way
    "opencl": {"flops_per_s": {"float32": 300e9}, "bytes_per_s": 30e9},  # the FMA loop
}
FAST = 100.0  # GFLOP/s of the opencl point at the smallest size: above its DRAM slope


def _stats(seconds: float) -> dict[str, float]:
    return {"median": seconds, "q1": seconds, "q3": seconds * 1.01, "min": seconds, "noise": 0.01}


def _point(label: str, variant: str, tile: int | None, shape: tuple[int, int, int],
           gflops: float) -> dict[str, Any]:  # fmt: skip
    M, K, N = shape
    flops = 2 * M * K * N
    seconds = flops / gflops / 1e9
    return {
        "type": "point", "run_id": "r", "backend": label, "label": label, "device": "EPYC",
        "variant": variant, "tile": tile, "dtype": "float32", "M": M, "K": K, "N": N,
        "flops": flops, "status": "ok", "equal": True, "kernel_s": _stats(seconds),
        "end_to_end_s": _stats(seconds * 1.2), "gflops": gflops, "cache": "warm",
    }  # fmt: skip


def _results(folder: Path, environment: dict[str, Any] | None = None) -> Path:
    rng = np.random.default_rng(26)
    header = {
        "type": "run", "run_id": "r", "timestamp": "2026-11-25T00:00:00+00:00",
        "environment": {"host": "vm", "cpu": "EPYC", "xbackend": "0.1.0", **(environment or {})},
        "plan": {"shapes": [list(shape) for shape in SHAPES], "seed": 0},
        "devices": {label: {"name": "EPYC", "ceilings": c} for label, c in CEILINGS.items()},
    }  # fmt: skip
    lines = [header]
    for shape in SHAPES:
        for label, variant, tile in CONFIGS:
            gflops = float(rng.uniform(1.0, 30.0))
            if (label, shape) == ("opencl", SHAPES[0]):
                gflops = FAST
            lines.append(_point(label, variant, tile, shape, gflops))
    folder.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(line) + "\n" for line in lines)
    (folder / "results.jsonl").write_text(text, encoding="utf-8")
    return folder


def _outside_details(page: str) -> str:
    return re.sub(r"<details>.*?</details>", "", page, flags=re.DOTALL)


def _size_cells(page: str) -> list[str]:
    """The first cell of every table row: the size, where the row is one of a size table."""
    return re.findall(r"<tr><td>(\d+×\d+·\d+×\d+)</td>", page)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = _results(tmp_path_factory.mktemp("run") / "run")
    write_report([folder], folder)
    return {
        "out": folder,
        "html": (folder / "report.html").read_text(encoding="utf-8"),
        "md": (folder / "report.md").read_text(encoding="utf-8"),
    }


def _name(shape: tuple[int, int, int]) -> str:
    M, K, N = shape
    return f"{M}×{K}·{K}×{N}"


def test_the_page_shows_the_key_sizes_and_folds_the_whole_table(report):
    shown = _size_cells(_outside_details(report["html"]))
    key = [_name(SHAPES[0]), _name(SHAPES[4]), _name(SHAPES[-1])]
    assert sorted(set(shown), key=shown.index) == key
    assert len(shown) == len(key) * len(CONFIGS)
    # The paragraph says which sizes these are, and where the whole table is.
    page = html.unescape(report["html"])
    assert f"the smallest ({key[0]}), the middle ({key[1]}) and the largest ({key[2]})" in page
    assert "report_figures/assignment/sizes.csv" in page
    folded = re.findall(r"<details>.*?</details>", report["html"], flags=re.DOTALL)
    whole = [part for part in folded if "The whole table" in part]
    assert len(whole) == 1 and len(_size_cells(whole[0])) == len(SHAPES) * len(CONFIGS)


def test_the_whole_table_is_written_beside_the_figures(report):
    path = report["out"] / "report_figures" / "assignment" / "sizes.csv"
    with path.open(encoding="utf-8") as file:
        rows = list(csv.DictReader(file))
    assert len(rows) == len(SHAPES) * len(CONFIGS)
    assert {(int(row["M"]), int(row["K"]), int(row["N"])) for row in rows} == set(SHAPES)
    assert not (report["out"] / "sizes.csv").exists()  # a run's own file is not the report's


def test_the_machines_are_folded_with_the_kernel_sources(report):
    outside = _outside_details(report["html"])
    assert "<h3" in outside and "the command, kernel sources" in report["html"]
    assert "kernel sources" not in html.unescape(outside).split("Machines", 1)[1].replace(
        "the command, kernel sources", ""
    )
    assert "shipped with xbackend 0.1.0; no digests in the run header" in report["md"]


def test_digests_the_run_header_keeps_are_shown(tmp_path):
    kernels = {"mm": {"digest": "3f2a9c0d1e5b7a64"}, "rmm": "0c9d8e7f6a5b4c3d"}
    folder = _results(tmp_path / "run", {"kernels": kernels, "settings": {
        "XBACKEND_KERNELS": "/home/student/kernels"}})  # fmt: skip
    write_report([folder], folder)
    markdown = (folder / "report.md").read_text(encoding="utf-8")
    assert "XBACKEND\\_KERNELS=/home/student/kernels" in markdown
    assert "mm 3f2a9c0d1e5b7a64; rmm 0c9d8e7f6a5b4c3d" in markdown


def test_one_device_has_one_set_of_ceilings_the_highest_measured():
    header = RunHeader.from_dict(json.loads(json.dumps({
        "run_id": "r", "environment": {"host": "vm"},
        "devices": {label: {"name": "EPYC", "ceilings": c} for label, c in CEILINGS.items()},
    })))  # fmt: skip
    found = roofs([header])
    assert found[("r", "cpu")] == found[("r", "opencl")]
    roof = found[("r", "cpu")]
    assert roof.flops_per_s == {"float32": 300e9} and roof.bytes_per_s == 30e9
    assert roof.by == {"float32": "opencl", "bandwidth": "opencl"}
    assert roof.label == "cpu, opencl"
    # The same name on another host is another device.
    other = RunHeader(run_id="s", environment={"host": "lab"},
                      devices={"cpu": {"name": "EPYC", "ceilings": CEILINGS["cpu"]}})  # fmt: skip
    apart = roofs([header, other])
    assert apart[("s", "cpu")].flops_per_s == {"float32": 40e9}


def test_the_report_says_which_ceilings_and_marks_shares_above_100(report):
    markdown = report["md"]
    roofline = markdown.split("## Roofline", 1)[1].split("\n## ", 1)[0]
    assert "EPYC on vm, for cpu, opencl: 300 GFLOP/s float32 (measured by opencl)" in roofline
    # Every share of the roof is of the one set: the cpu's rows too, at 300 GFLOP/s; the
    # table is folded on the page, in the appendix of the Markdown.
    summary = "Each configuration's share of its roof at its largest size (3 rows)"
    assert f"{summary}: in the appendix, at the end." in roofline
    folded = markdown.split(f"\n### {summary}\n", 1)[1].split("\n### ", 1)[0]
    shares = [line for line in folded.splitlines() if line.startswith("| cpu | mm |")]
    assert shares and all("| 300 |" in line for line in shares)
    # The opencl point at the smallest size beat its DRAM slope (a warm cache): marked.
    key = markdown.split("The key sizes", 1)[1]
    smallest = [
        line for line in key.splitlines() if line.startswith(f"| {_name(SHAPES[0])} | opencl")
    ]
    # In the key sizes' table (without its columns of one value), then in the whole one.
    assert len(smallest) == 2 and all(re.search(r"\| \d+%↑ \|$", line) for line in smallest)
    assert "↑: above 100%" in markdown


def test_the_page_opens_with_findings_then_figures_then_tables_then_provenance(report):
    """The structure a teacher reads, not its height in pixels: the findings open the page,
    before any figure or table of sizes; the whole table, the roofline's shares and
    ceilings and each run's machine are folded away (``<details>``)."""
    page = report["html"]
    findings = page.index('<h2 id="findings">')
    assert findings < page.index("<figure") < page.index("The key sizes")
    assert page.index("The key sizes") < page.index('<h2 id="roofline">')
    assert page.index('<h2 id="roofline">') < page.index('<h2 id="machines">')
    assert '<ul class="findings">' in page[findings : page.index("<figure")]
    outside = _outside_details(page)
    assert len(_size_cells(outside)) == 3 * len(CONFIGS)  # only the key sizes unfolded
    for folded in ("The whole table: 27 rows", "share of its roof at its largest size",
                   "The ceilings each backend measured", "the command, kernel sources",
                   "How to read the table"):  # fmt: skip
        assert folded not in outside and folded in page, folded
    assert "<th>setting</th>" not in outside and "<th>FLOP/byte</th>" not in outside


def test_the_markdown_keeps_the_order_and_puts_the_full_tables_last(report):
    markdown = report["md"]
    headings = [line for line in markdown.splitlines() if line.startswith("## ")]
    assert headings[0] == "## Findings"
    assert headings[-1] == "## Appendix: the folded sections"
    assert headings.index("## Roofline") < headings.index("## Machines") < len(headings) - 1
    body, appendix = markdown.split("\n## Appendix: the folded sections\n")
    # Before the appendix, the key sizes only; each fold is a line that points to it.
    assert len(set(_size_cells_md(body))) == 3
    assert "The whole table: 27 rows, every size: in the appendix, at the end." in body
    assert "### The whole table: 27 rows, every size" in appendix
    assert len(_size_cells_md(appendix)) == len(SHAPES) * len(CONFIGS)


def _size_cells_md(markdown: str) -> list[str]:
    return re.findall(r"^\| (\d+×\d+·\d+×\d+) \|", markdown, re.M)
