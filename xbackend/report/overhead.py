"""The report's launch overhead: where the kernels timed themselves on the GPU's clock,
what a launch costs beyond them, as a figure against size (``figures/overhead.py``) and
a table per backend and variant (``clocks.overheads``). Runs whose kernels did not time
themselves have no section: their kernel time is the API's."""

from __future__ import annotations

from xbackend.analysis.clocks import OVERHEAD_MEANING, Overhead, has_overhead, overheads
from xbackend.figures.overhead import NAME, overhead_figure
from xbackend.report.document import Block, Cell, Fold, Heading, Paragraph, Table
from xbackend.report.figures import FigureFolder, Section, side_figure
from xbackend.report.points import three_digits
from xbackend.results import PointRecord

_CAPTION = (
    "Launch overhead per launch against the output's elements, one line per backend and "
    "variant (dotted: the gap between launches on the device, where batches recorded it; "
    "hollow: a sample of one launch)."
)


def _micro(seconds: float | None) -> str:
    return "—" if seconds is None else three_digits(seconds * 1e6)


def _launches(found: Overhead) -> str:
    fewest, most = found.launches
    return str(fewest) if fewest == most else f"{fewest} – {most}"


def overhead_table(points: list[PointRecord]) -> Table | None:
    """One row per backend and variant with an overhead; None where none has one."""
    found = overheads(points)
    if not found:
        return None
    several = {o.label for o in found if len({p.device for p in found if p.label == o.label}) > 1}
    rows = [
        [
            Cell(f"{o.label} ({o.device})" if o.label in several else o.label),
            Cell(o.variant + (f" T={o.tile}" if o.tile else "")),
            Cell(str(o.points)),
            Cell(_launches(o)),
            Cell(_micro(o.median_s)),
            Cell(f"{_micro(o.low_s)} – {_micro(o.high_s)}"),
            Cell(_micro(o.gap_s)),
        ]
        for o in found
    ]
    header = ["backend", "variant", "sizes", "launches a sample", "overhead, median (µs)",
              "range (µs)", "gap between launches (µs)"]  # fmt: skip
    return Table(header, rows, numeric=False)


def overhead_section(points: list[PointRecord], folder: FigureFolder) -> Section:
    """The section, or nothing where no point has the API's time beside its span."""
    if not has_overhead(points):
        return [], []
    table = overhead_table(points)
    if table is None:  # every point with an overhead was untrusted
        return [], []
    # The figure at the right, the text beside it; the table per backend folded below.
    blocks: list[Block] = [Heading("Launch overhead", 2)]
    images, written = side_figure(points, folder, NAME, _CAPTION, lambda: overhead_figure(points))
    blocks += images
    blocks += [
        Paragraph(
            f"Launch overhead: {OVERHEAD_MEANING}. Each point's is the median of the API's "
            "time per launch less the median span; the table per backend and variant (single "
            "launches apart from batches, which share a launch's fixed costs) gives the "
            "median of those over the sizes and their range, and the median gap between "
            "launches on the device where batches recorded it. The kernel times in the "
            "figures and tables above are the spans, without this cost."
        ),
        Paragraph(_summary(points)),
        Fold(f"The overhead per backend and variant ({len(table.rows)} rows)", [table]),
    ]
    return blocks, written


def _summary(points: list[PointRecord]) -> str:
    """Per backend, the median overhead of its single launches and of its batches."""
    found = overheads(points)
    parts = []
    backends = list(dict.fromkeys((o.label, o.device) for o in found))
    several = {label for label, _ in backends if sum(b[0] == label for b in backends) > 1}
    for label, device in backends:
        mine = [o for o in found if (o.label, o.device) == (label, device)]
        name = f"{label} ({device})" if label in several else label
        single = [o.median_s for o in mine if o.launches == (1, 1)]
        batched = [o.median_s for o in mine if o.launches != (1, 1)]
        said = []
        if single:
            said.append(f"{_span(single)} µs a single launch")
        if batched:
            said.append(f"{_span(batched)} µs a launch in a batch")
        if said:
            parts.append(f"{name}: {', '.join(said)}")
    return "Median overhead per variant, " + "; ".join(parts) + "." if parts else ""


def _span(values: list[float]) -> str:
    low, high = _micro(min(values)), _micro(max(values))
    return low if low == high else f"{low} – {high}"
