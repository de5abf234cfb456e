"""The report's roofline: the ceilings every run measured per device, the roofline figure
of every point (``figures/roofline.py``), and each configuration's share of its roof at
its largest size (``xbackend.analysis.roofs``). Runs that measured no ceilings have no section."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from xbackend.analysis.roofs import (
    Roofs,
    api_roofs,
    devices,
    intensity,
    profiled,
    roof_of,
    roof_share,
)
from xbackend.figures.roofline import roofline
from xbackend.measuring.timing import rate_text
from xbackend.report.document import Block, Cell, Fold, Heading, Paragraph, Table
from xbackend.report.figures import ROOFLINE, FigureFolder, Section, side_figure
from xbackend.report.points import dtype_sort, size_text, three_digits
from xbackend.results import PointRecord, RunHeader

_HOW = (
    "Before its first point each run measured the ceilings of its devices: the FLOP/s of "
    "an FMA loop (independent fused multiply-add chains in registers) per float data type "
    "and the bytes per second of a large copy (kernels/*/ceilings), or on the CPU backend "
    "NumPy's BLAS on a large product and numpy.copyto; each the best of its timed runs."
)
_INTRO = (
    "A point's arithmetic intensity is its flops over the DRAM bytes its kernels moved "
    "where xbackend profile counted them for its configuration and size (the profile's "
    "results given to the report beside the run's), else over its operation's fewest "
    "bytes (each input read once, the output written once); its roof is "
    "min(compute ceiling, intensity × bandwidth) of its device; its share is the GFLOP/s "
    "it reached over that roof (↑: above 100%, where operands in a warm cache beat the "
    "DRAM's slope, or within the 5% tolerance); its share of its API's roof, the same over "
    "the ceilings its own backend measured on the device (its FMA loop and copy; NumPy's on "
    "the CPU backend). A "
    "point faster than its device's compute ceiling by more than 5% is flagged UNTRUSTED, "
    "as one beyond its theoretical peak."
)


def _rate(value: Any, unit: str) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        return "—"
    return rate_text(float(value), unit)


def _ceilings_table(runs: Mapping[str, RunHeader]) -> Table | None:
    """One row per device of every run that tried to measure its ceilings."""
    rows = []
    several = len(runs) > 1
    for run_id, run in sorted(runs.items(), key=lambda item: item[1].timestamp):
        for label, device in run.devices.items():
            ceilings = device.get("ceilings")
            if not isinstance(ceilings, dict):
                continue
            flops = ceilings.get("flops_per_s")
            flops = flops if isinstance(flops, dict) else {}
            how = ceilings.get("how")
            how = how if isinstance(how, dict) else {}
            text = "; ".join(f"{name}: {value}" for name, value in how.items())
            problem = ceilings.get("problem")
            rows.append(
                [
                    *([Cell(run_id)] if several else []),
                    Cell(label),
                    Cell(str(device.get("name") or "—")),
                    Cell(_rate(flops.get("float32"), "FLOP")),
                    Cell(_rate(flops.get("float64"), "FLOP")),
                    Cell(_rate(ceilings.get("bytes_per_s"), "B")),
                    Cell(_rate(ceilings.get("triad_bytes_per_s"), "B")),
                    Cell(f"not measured: {problem}" if problem else text, "error" * bool(problem)),
                ]
            )
    if not rows:
        return None
    header = ["backend", "device", "float32", "float64", "bandwidth", "triad", "measured by"]
    return Table(["run", *header] if several else header, rows, numeric=False)


def _one_set(found: Roofs) -> list[Block]:
    """Where several backends measured one device: the one set of ceilings it gets."""
    shared = [roof for roof in devices(found) if ", " in roof.label]
    if not shared:
        return []
    sentences = []
    for roof in shared:
        parts = [
            f"{rate_text(rate, 'FLOP')} {dtype} (measured by {roof.by.get(dtype, '?')})"
            for dtype, rate in sorted(roof.flops_per_s.items(), key=lambda i: dtype_sort(i[0]))
        ]
        if roof.bytes_per_s is not None:
            by = roof.by.get("bandwidth", "?")
            parts.append(f"{rate_text(roof.bytes_per_s, 'B')} (measured by {by})")
        host = f" on {roof.host}" if roof.host else ""
        sentences.append(f"{roof.device}{host}, for {roof.label}: {', '.join(parts)}.")
    return [
        Paragraph(
            "One set of ceilings per device (a device is its name on its host): where "
            "several backends measured the same device, each ceiling is the highest they "
            "measured, and the roofline, the shares and the check of times too fast to be "
            "true all use it. " + " ".join(sentences)
        )
    ]


def _shares_table(points: list[PointRecord], folder: FigureFolder, own: Roofs) -> Table | None:
    """Each configuration at its largest size with a roof: where it stands under it, and
    under the ceilings its own backend measured (``own``: ``roofs.api_roofs``)."""
    largest: dict[tuple[object, ...], PointRecord] = {}
    for point in points:
        if roof_share(point, folder.roofs) is None:
            continue
        key = (*point.line_key, point.batch)
        known = largest.get(key)
        if known is None or (point.flops, point.M, point.N) > (known.flops, known.M, known.N):
            largest[key] = point
    rows = []
    order = sorted(largest.values(), key=lambda p: (p.label, p.op, dtype_sort(p.dtype), p.variant))
    for point in order:
        roof = roof_of(point, folder.roofs)
        flop_per_byte = intensity(point)
        attainable = roof.attainable(point.dtype, flop_per_byte) if roof else None
        share = roof_share(point, folder.roofs)
        api_share = roof_share(point, own)
        rows.append(
            [
                Cell(point.label),
                Cell(point.op + (f" ×{point.batch}" if point.batched else "")),
                Cell(point.variant + (f" T={point.tile}" if point.tile else "")),
                Cell(point.dtype),
                Cell(size_text(point)),
                Cell(three_digits(flop_per_byte or 0.0)),
                Cell(three_digits(point.gflops or 0.0)),
                Cell(three_digits((attainable or 0.0) / 1e9)),
                Cell(_percent(share)),
                Cell(_percent(api_share)),
            ]
        )
    if not rows:
        return None
    header = ["backend", "op", "variant", "dtype", "largest size", "FLOP/byte", "GFLOP/s",
              "roof (GFLOP/s)", "share of roof", "of its API's roof"]  # fmt: skip
    return Table(header, rows, numeric=False)


def _percent(share: float | None) -> str:
    if share is None:
        return "—"
    return f"{three_digits(share * 100)}%" + ("↑" if share > 1 else "")


def roofline_section(
    points: list[PointRecord], folder: FigureFolder, runs: Mapping[str, RunHeader]
) -> Section:
    """The section, or nothing where no run measured ceilings."""
    points = profiled(points)  # the bytes the profile counted, where it did
    ceilings = _ceilings_table(runs)
    if ceilings is None:
        return [], []
    # The figure at the right, the text beside it; the tables folded away below it.
    blocks: list[Block] = [Heading("Roofline", 2)]
    caption = (
        "Roofline: each configuration's arithmetic intensity against its GFLOP/s (colour: "
        "variant; marker: backend; large: its largest size) under its device's measured "
        "roofs (grey: the bandwidth's slope, then the compute ceiling)."
    )
    images, written = side_figure(
        points, folder, ROOFLINE, caption, lambda: roofline(points, folder.roofs)
    )
    blocks += images
    blocks += [Paragraph(_INTRO), *_one_set(folder.roofs)]
    shares = _shares_table(points, folder, api_roofs(runs.values()))
    if shares is not None:
        rows = len(shares.rows)
        summary = f"Each configuration's share of its roof at its largest size ({rows} rows)"
        blocks.append(Fold(summary, [shares]))
    else:
        blocks.append(Paragraph("No verified point has a measured roof: no shares."))
    blocks.append(Fold("The ceilings each backend measured, and how", [Paragraph(_HOW), ceilings]))
    return blocks, written
