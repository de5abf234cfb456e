"""Figures of the report: where they are written, how they are named, how they look.

File names are made of :func:`~xbackend.safeio.safe_name` parts (kept apart where two
values sanitise alike); every level below the report's folder is xbackend's, so a link
found there is refused. The generic figures (``plots.figures``) that the command drew
already for the same points are shown as they are, not drawn again.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from xbackend.analysis.roofs import Roofs
from xbackend.figures import plots
from xbackend.figures.energy import NAME as ENERGY
from xbackend.figures.overhead import NAME as OVERHEAD
from xbackend.figures.style import Palette, kernel_style, outside_legend
from xbackend.report.document import Block, Image, Paragraph
from xbackend.report.points import dtype_sort, group, op_sort
from xbackend.results import PointRecord
from xbackend.safeio import UnsafePath, output_folder, safe_name

Section = tuple[list[Block], list[Path]]  # what a part of the report shows, and files written


@dataclasses.dataclass(frozen=True)
class FigureFolder:
    """A folder for figures below the report's folder, made when a figure is written.

    ``out`` is the user's choice (a link there is theirs to make); every level below
    it is xbackend's, so a link found there is refused, not followed out of the report.
    ``drawn``: the generic figures already drawn in this command, if any; ``roofs``: the
    ceilings the runs measured (``roofs.roofs``), for the tables' roof shares.
    """

    out: Path
    names: tuple[str, ...] = ()
    drawn: plots.Drawn | None = None
    roofs: Roofs = dataclasses.field(default_factory=dict)

    def __truediv__(self, name: str) -> FigureFolder:
        if name != safe_name(name, limit=255):
            raise ValueError(f"{name!r} is not a safe folder name")
        return dataclasses.replace(self, names=(*self.names, name))

    def make(self) -> Path:
        path = self.out
        for name in self.names:
            path = path / name
            if path.is_symlink():
                raise UnsafePath(
                    f"{path} is a symbolic link; xbackend does not write through links"
                )
            output_folder(path)
        return path


_Key = TypeVar("_Key", bound=Hashable)


def file_name(template: str, *fields: object) -> tuple[str, bool]:
    """``template`` filled with each field as a safe file-name part; and whether every
    field was one already (float32, mm, 64), so that the name is exactly the values."""
    parts = [safe_name(field) for field in fields]
    exact = all(part == str(field) for part, field in zip(parts, fields, strict=True))
    return template.format(*parts), exact


def unique_names(names: dict[_Key, tuple[str, bool]]) -> dict[_Key, str]:
    """One file name per key (from :func:`file_name`), no two alike, not even in case.

    Exact names are given out first and kept as they are, so figures of ordinary values
    keep their names; a name already given gets a short hash of its key, so values that
    sanitise alike (``a/b``, ``a_b``) or differ only in case get files of their own.
    """
    given: dict[_Key, str] = {}
    taken: set[str] = set()
    order = sorted(
        names.items(),
        key=lambda item: (not item[1][1], item[1][0] != item[1][0].lower(), item[1][0]),
    )
    for key, (name, _) in order:
        candidate = name
        if candidate.casefold() in taken:
            candidate = f"{name}-{hashlib.sha256(repr(key).encode()).hexdigest()[:8]}"
        serial = 2
        while candidate.casefold() in taken:
            candidate, serial = f"{name}-{serial}", serial + 1
        taken.add(candidate.casefold())
        given[key] = candidate
    return given


def save(figure: Figure, folder: FigureFolder, name: str, caption: str) -> tuple[Image, list[Path]]:
    paths, png = plots.save(figure, folder.make(), name, dpi=110)
    return Image(paths[0], png, caption), paths


def side_figure(
    points: list[PointRecord], folder: FigureFolder, name: str, caption: str,
    draw: Callable[[], Figure | None],
) -> tuple[list[Image], list[Path]]:  # fmt: skip
    """A section's figure at the right of its text: the one the command drew already of
    these points, else ``draw``'s, saved; none where there is nothing to draw."""
    drawn = folder.drawn
    if drawn is not None and drawn.shows(points) and name in drawn.pngs:
        png, data = drawn.pngs[name]
        return [Image(png, data, caption, side=True)], []
    figure = draw()
    if figure is None:
        return [], []
    image, written = save(figure, folder, name, caption)
    return [dataclasses.replace(image, side=True)], written


def style(palette: Palette, label: str, variant: str, tile: int | None) -> dict[str, Any]:
    """A line's look, as figures/plots.py gives it: colour per variant (shade per tile), marker
    per backend, solid for a kernel and dashed for the vendor's reference."""
    return {
        "color": palette.colour(variant, tile),
        "marker": palette.marker(label),
        "linestyle": kernel_style(variant),
        "markersize": 4,
    }


WRONG: dict[str, Any] = {"marker": "x", "color": "red", "markersize": 9, "markeredgewidth": 2}


def cross(axes: Axes, x: list[float], y: list[float]) -> None:
    """Wrong results, as figures/plots.py draws them: a red cross, never a point of a line."""
    if x:
        axes.plot(x, y, linestyle="none", label="wrong result", **WRONG)


def size_axis(axes: Axes, sizes: Iterable[int]) -> None:
    """A logarithmic size axis labelled with the sizes themselves (512, not 2⁹)."""
    ticks = sorted({n for n in sizes if n > 0})
    axes.set_xscale("log", base=2)
    axes.set_xticks(ticks, [str(n) for n in ticks])
    axes.xaxis.set_minor_locator(NullLocator())


def legend(figure: Figure, axes: Axes) -> None:
    """The axes' entries as one legend right of the axes, off the data."""
    handles, labels = axes.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    for label, handle in unique.items():
        handle.set_label(label)
    outside_legend(figure, list(unique.values()), figure.get_figheight())


_GENERIC_CAPTIONS = {
    "runtime_by_backend": "Naive against tiled, one panel per backend, the vendor's line dashed "
    "as a reference: median kernel time against the output's elements (band: quartiles; "
    "dotted: end-to-end with transfers).",
    "runtime_all": "Naive, tiled and vendor of every backend: median kernel time.",
    "gflops": "Throughput from the median kernel time (2·M·N·K flops per product).",
    "ladder": "The ladder: every variant's throughput, one panel per backend.",
    "speedup": "Speed-up against size: each variant over its own naive kernel (tiled over "
    "naive; a user family's kernels over the family's naive), with the interval the two "
    "medians' 95% intervals allow; hollow where a side was noisy or throttled.",
}


_SIDE_BY_SIDE = ("runtime_all", "gflops")
ROOFLINE = "roofline"  # plots.figures' name of the roofline


def generic_figures(points: list[PointRecord], folder: FigureFolder) -> Section:
    """plots.draw's figures, once per operation, data type and batch (draw mixes none)."""
    blocks: list[Block] = []
    written: list[Path] = []
    groups = group(points, lambda p: (p.op, p.dtype, p.batch))
    order = sorted(groups, key=lambda key: (op_sort(key[0]), dtype_sort(key[1]), key[2]))
    subfolders = unique_names(
        {
            (op, dtype, batch): file_name("{}-{}-b{}", op, dtype, batch)
            if batch != 1
            else file_name("{}-{}", op, dtype)
            for op, dtype, batch in groups
        }
    )
    for op, dtype, batch in order:
        part = groups[(op, dtype, batch)]
        if not any(point.trusted for point in part):
            continue
        sub = folder / subfolders[(op, dtype, batch)] if len(groups) > 1 else folder
        what = f"{op}, {dtype}" + (f", batch {batch}" if batch != 1 else "")
        for name, (png, data) in _drawn(part, sub, written).items():
            if name in (ROOFLINE, OVERHEAD, ENERGY):
                continue  # the report's own sections show them, once for every point
            caption = _GENERIC_CAPTIONS.get(name, name.replace("_", " "))
            half = name in _SIDE_BY_SIDE  # one axes each: read side by side
            blocks.append(Image(png, data, f"{caption.rstrip('.')} ({what}).", half))
    if not blocks:
        blocks.append(
            Paragraph(
                "No measured points to draw: every point was skipped, failed, or timed "
                "faster than its device's peak."
            )
        )
    return blocks, written


def _drawn(
    points: list[PointRecord], folder: FigureFolder, written: list[Path]
) -> dict[str, tuple[Path, bytes]]:
    """The generic figures of ``points``: those the command drew already, else drawn here
    (as plots.draw writes them) with their files added to ``written``."""
    if folder.drawn is not None and folder.drawn.shows(points):
        return folder.drawn.pngs
    drawn = plots.draw_figures(points, folder.make())
    written += drawn.written
    return drawn.pngs
