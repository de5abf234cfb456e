"""The report's counters: what Nsight Compute counted for each point ``xbackend profile``
recorded, as its figures (``figures/counters.py``) and a table (``profiling/table.py``),
under the tool's version and settings. Results with no profiled point have no section."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from xbackend.figures.counters import figures, profiled
from xbackend.profiling.table import rows
from xbackend.report.document import Block, Cell, Heading, Paragraph, Table
from xbackend.report.figures import FigureFolder, Section, save
from xbackend.results import PointRecord, RunHeader

_INTRO = (
    "These points ran once each under Nsight Compute (xbackend profile), checked against "
    "the reference as every point is; the kernel time is ncu's gpu__time_duration of the "
    "point's kernels, and there is no end-to-end time. Global load requests are the "
    "warp-level load instructions the kernels sent to L1 (l1tex__t_requests_pipe_lsu_mem_"
    "global_op_ld), sectors the 32-byte pieces they asked for; L2 sectors read come from "
    "every unit; DRAM bytes are what crossed the memory interface; achieved occupancy is "
    "the warps in flight over the most an SM holds (sm__warps_active)."
)
_CAPTION = (
    "Global load requests, L2 sectors read, DRAM bytes (read; written hatched) and kernel "
    "time per variant and tile (colour: variant; lighter: smaller tile); ÷N: N times fewer "
    "load requests than naive at the same size and tile."
)


def _settings(runs: Mapping[str, RunHeader], points: list[PointRecord]) -> str:
    """How ncu ran, for each run with profiled points: version and settings."""
    found = []
    for run_id in dict.fromkeys(point.run_id for point in points):
        run = runs.get(run_id)
        profiler = run.environment.get("profiler") if run is not None else None
        if isinstance(profiler, dict):
            found.append(
                f"Nsight Compute {profiler.get('version', '?')}, --clock-control "
                f"{profiler.get('clock_control', '?')} --cache-control "
                f"{profiler.get('cache_control', '?')}"
            )
    return "; ".join(dict.fromkeys(found)) or "Nsight Compute (settings not recorded)"


def counters_section(
    points: list[PointRecord], folder: FigureFolder, runs: Mapping[str, RunHeader]
) -> Section:
    """The section, or nothing where no point was profiled."""
    drawn = profiled(points)
    if not drawn:
        return [], []
    blocks: list[Block] = [
        Heading("Counters (Nsight Compute)", 2),
        Paragraph(f"{_INTRO} Measured with {_settings(runs, drawn)}."),
    ]
    written: list[Path] = []
    for name, figure in figures(drawn):
        image, files = save(figure, folder / "counters", name, _CAPTION)
        blocks.append(image)
        written += files
    header, *body = rows(drawn)
    blocks.append(Table(header, [[Cell(text) for text in row] for row in body], numeric=False))
    return blocks, written
