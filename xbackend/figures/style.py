"""One look per meaning, the same in every panel and figure.

* colour: the variant, from a fixed map (:data:`VARIANT_COLOURS`); a variant no map
  names gets one of :data:`SPARE_COLOURS`, never a colour another variant has. Red is
  left out: a red cross is a wrong result;
* shade: the tile, where one variant runs with several tiles (lighter: smaller);
* marker: the backend (its label), in the order the figure's points name them;
* line style: kernel time solid, end-to-end time dotted, the vendor's line dashed
  (a reference, not a kernel of ours).

What a point's record flags is drawn as such (:func:`trust_handles`): a noisy point
(the interval of its median wider than ±2.5%, timing.NOISY_SHARE) is a hollow marker; a
throttled point (every sample marked) and one timed faster than its device can run (not
``trusted``) are no points of a line, and the legend says how many were left out.

Legends go outside the axes (:func:`outside_legend`); strings from results files reach
a figure only through :func:`literal`. A figure of points timed in another cache state
than the usual warm one says so under its title (:func:`cache_note`), and a figure of
kernel times names the clock that timed them (:func:`with_clock_note`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Final, Literal

from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.colors import to_hex, to_rgb
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.text import Text
from matplotlib.ticker import FixedFormatter, Formatter, FuncFormatter

from xbackend.analysis.clocks import clock_note, wrapped
from xbackend.analysis.tables import CORE_VARIANTS
from xbackend.operations import Shape, operation
from xbackend.results import PointRecord
from xbackend.safeio import printable

VARIANT_COLOURS = {
    "naive": "#ff7f0e",  # orange
    "tiled": "#1f77b4",  # blue
    "vendor": "#000000",  # black, dashed: the reference
    "reg1d": "#e6ab02",  # mustard
    "reg2d": "#2ca02c",  # green
    "reg2d_cf": "#9467bd",  # purple
    "reg2d_g4": "#8c564b",  # brown
    "vec4": "#e377c2",  # pink
    "vec4_db": "#7f7f7f",  # grey
    "warp": "#17becf",  # cyan
    "warp_db": "#a55194",  # magenta
    "warp_async": "#393b79",  # indigo
    "naive4": "#bcbd22",  # olive
}
SPARE_COLOURS = (
    "#637939",
    "#843c39",
    "#6b6ecf",
    "#9edae5",
    "#dbdb8d",
    "#e7969c",
    "#c49c94",
)
WRONG_COLOUR = "red"
BACKEND_MARKERS = "osD^vP*Xph<>"
LineStyle = Literal["-", ":", "--"]
KERNEL: Final = "-"
END_TO_END: Final = ":"
VENDOR: Final = "--"
_LONGEST_LABEL = 48  # characters of a legend entry
_SHADE = 0.45  # how far the lightest and darkest tiles move towards white and black


def literal(text: object) -> str:
    """``text`` as matplotlib should show it: as written, never as mathtext.

    Matplotlib reads a string with an even number of unescaped ``$`` as mathtext, so a
    label such as ``a$x^{`` next to a device ``b$y`` stops the drawing with a parse
    error. Escaped, every ``$`` is drawn as it is; a control character is drawn as its
    escape (``\x1b``), which the font has (matplotlib's warning of a missing glyph
    printed the raw character on the terminal).
    """
    return printable(text).replace("$", r"\$")


def drawable(text: str) -> str:
    """``text`` with its control characters as escapes, line by line: a figure's own
    line breaks (a title's lines) kept."""
    return "\n".join(printable(line) for line in text.split("\n"))


def without_controls(figure: Figure) -> None:
    """Every text of ``figure`` without a raw control character (its escape instead),
    whatever came past ``literal``: none reaches the font, whose warning of a missing
    glyph printed the raw character on the terminal. Tick labels given as strings are
    drawn again from their formatter's, so those are changed there."""
    for text in figure.findobj(Text):
        if text.get_text() != drawable(text.get_text()):
            text.set_text(drawable(text.get_text()))
    for axes in figure.get_axes():
        for axis in (axes.xaxis, axes.yaxis):
            for formatter in (axis.get_major_formatter(), axis.get_minor_formatter()):
                if isinstance(formatter, FixedFormatter):
                    formatter.seq = [drawable(str(label)) for label in formatter.seq]
                elif isinstance(formatter, FuncFormatter):  # set_ticks(ticks, labels)
                    formatter.func = _drawn_by(formatter.func)


def _drawn_by(given: Callable[..., object]) -> Callable[..., str]:
    """A tick formatter's function whose labels are drawable (``without_controls``)."""

    def label(x: float, pos: int | None = None) -> str:
        return drawable(str(given(x, pos)))

    return label


def short(text: object, limit: int = 60) -> str:
    """``text`` for a title or a tick: one line, at most ``limit`` characters, literal."""
    line = " ".join(str(text).split())
    return literal(line if len(line) <= limit else line[: limit - 1] + "…")


def variant_sort(variant: str) -> tuple[int, str]:
    """naive, tiled, vendor first; then the ladder in the map's order; then the rest."""
    order = list(VARIANT_COLOURS)
    core = CORE_VARIANTS.index(variant) if variant in CORE_VARIANTS else len(CORE_VARIANTS)
    return (core, f"{order.index(variant):03d}" if variant in order else variant)


def _mix(colour: str, towards: tuple[float, float, float], amount: float) -> str:
    r, g, b = to_rgb(colour)
    return to_hex(
        (
            r + (towards[0] - r) * amount,
            g + (towards[1] - g) * amount,
            b + (towards[2] - b) * amount,
        )
    )


class Palette:
    """The colours and markers of one set of figures: fixed per variant, and per tile
    and backend from every point the figures show (so each looks the same in all)."""

    def __init__(self, series: Iterable[tuple[str, str, int | None]]) -> None:
        """``series``: every (backend label, variant, tile) the figures show."""
        found = set(series)
        unknown = sorted({variant for _, variant, _ in found if variant not in VARIANT_COLOURS})
        self.colours = dict(VARIANT_COLOURS)
        for index, variant in enumerate(unknown):
            self.colours[variant] = SPARE_COLOURS[index % len(SPARE_COLOURS)]
        # Shades only for a variant that one backend runs with several tiles: the same
        # variant at another tile on another backend is told apart by its panel or marker.
        per_backend: dict[tuple[str, str], set[int | None]] = {}
        for label, variant, tile in found:
            per_backend.setdefault((label, variant), set()).add(tile)
        shaded = {variant for (_, variant), tiles in per_backend.items() if len(tiles) > 1}
        self.tiles: dict[str, list[int | None]] = {}
        for _, variant, tile in sorted(found, key=lambda s: (s[1], s[2] or 0)):
            if variant in shaded and tile is not None and tile not in self.tiles.get(variant, []):
                self.tiles.setdefault(variant, []).append(tile)
        self.labels = sorted({label for label, _, _ in found})

    def colour(self, variant: str, tile: int | None = None) -> str:
        """The variant's colour, lighter for its smaller tiles and darker for its larger."""
        base = self.colours.get(variant, SPARE_COLOURS[-1])
        tiles = self.tiles.get(variant, [tile])
        if len(tiles) < 2 or tile not in tiles:
            return base
        place = tiles.index(tile) / (len(tiles) - 1) * 2 - 1  # -1 (smallest) to 1
        if place < 0:
            return _mix(base, (1.0, 1.0, 1.0), -place * _SHADE)
        return _mix(base, (0.0, 0.0, 0.0), place * _SHADE) if base != "#000000" else base

    def marker(self, label: str) -> str:
        if label not in self.labels:
            self.labels.append(label)
        return BACKEND_MARKERS[self.labels.index(label) % len(BACKEND_MARKERS)]


def kernel_style(variant: str) -> LineStyle:
    """The line style of a kernel time: dashed for the vendor's reference, else solid."""
    return VENDOR if variant == "vendor" else KERNEL


def series_name(variant: str, tile: int | None) -> str:
    """How a legend names a variant: its tile, and that the vendor's line is a reference."""
    name = f"{variant} T={tile}" if tile else variant
    return f"{name} (reference)" if variant == "vendor" else name


def output_elements(op: str, M: int, K: int, N: int) -> int:
    """Elements of one product's output: M·N, or (M/2)·(N/2) for a reduced product."""
    try:
        rows, columns = operation(op).output_size(Shape(max(M, 1), max(K, 1), max(N, 1)))
    except ValueError:  # an operation this version does not know: its output is unknown
        rows, columns = M, N
    return rows * columns


def output_label(ops: Iterable[str]) -> str:
    """The x axis of a figure of ``ops``: what one point's x counts."""
    reduced = set()
    for op in set(ops):
        try:
            reduced.add(operation(op).reduced)
        except ValueError:
            reduced.add(False)
    if reduced == {True}:
        return "output elements (M/2)·(N/2)"
    if reduced == {False}:
        return "output elements M·N"
    return "output elements (M·N; (M/2)·(N/2) for rmm)"


def cache_note(modes: Iterable[str]) -> str:
    """What a title says of the cache states of the points drawn (each point's ``cache``;
    "" is "warm", as in files from before the modes): nothing where all were warm."""
    found = sorted({mode or "warm" for mode in modes})
    if not found or found == ["warm"]:
        return ""
    if len(found) == 1:
        return f"cache: {found[0]}"
    return f"cache modes: {', '.join(found)}"


def with_cache_note(title: str, modes: Iterable[str]) -> str:
    """``title``, with :func:`cache_note` as its second line where there is one."""
    note = cache_note(modes)
    return f"{title}\n{literal(note)}" if note else title


def title_width(figure: Figure) -> int:
    """How many characters of a title fit over a figure's panels, left of its legend."""
    return max(40, int((figure.get_figwidth() - 2.6) * 72 / 5.6))


def with_clock_note(title: str, points: Iterable[PointRecord], width: int = 80) -> str:
    """``title`` in lines of at most ``width`` characters (a longer one ran into the
    legend right of a single panel), with the clock that timed the points' kernels under
    it (``clocks.clock_note``), where any point names its clock."""
    lines = [piece for line in title.split("\n") for piece in wrapped(line, width) or [line]]
    note = clock_note(points)
    return "\n".join([*lines, *map(literal, wrapped(note, width))]) if note else "\n".join(lines)


def panel_grid(
    panels: int, panel: tuple[float, float], margins: tuple[float, float]
) -> tuple[Figure, int, int]:
    """A figure for ``panels`` panels, two to a row: (the figure, rows, columns); each
    panel ``panel`` inches (width, height), plus ``margins`` for legend and titles."""
    columns = min(2, panels)
    rows = -(-panels // columns)
    size = (panel[0] * columns + margins[0], panel[1] * rows + margins[1])
    return Figure(figsize=size, layout="constrained"), rows, columns


def suptitle(figure: Figure, text: str) -> None:
    """The figure's title, left-aligned over its panels: a title centred on the whole
    figure would run into a wide legend right of the panels."""
    figure.suptitle(text, x=0.01, ha="left", fontsize=10)


def meaning_handles(end_to_end: bool) -> list[Artist]:
    """Legend entries for what the line styles mean."""
    handles: list[Artist] = [
        Line2D([], [], color="0.3", linestyle=KERNEL, label="kernel time (median)")
    ]
    if end_to_end:
        handles.append(
            Line2D([], [], color="0.3", linestyle=END_TO_END, label="end-to-end, with transfers")
        )
    return handles


def outside_legend(figure: Figure, handles: Sequence[Artist], height_in: float) -> None:
    """One legend for the whole figure, right of its panels, in as many columns as it
    takes to fit the figure's height (constrained layout makes room for it)."""
    if not handles:
        return
    for handle in handles:  # a long name from a results file must not squeeze the panels
        label = " ".join(str(handle.get_label()).split())
        handle.set_label(label)
        if len(label) > _LONGEST_LABEL:
            handle.set_label(label[: _LONGEST_LABEL - 1] + "…")
    per_column = max(4, int(height_in * 72 / 15))
    columns = math.ceil(len(handles) / per_column)
    figure.legend(
        handles=list(handles),
        loc="outside right upper",
        fontsize=8,
        ncols=columns,
        frameon=False,
    )


def noisy(point: PointRecord) -> bool:
    """Whether the record flags the point noisy: drawn hollow, never as a steady point."""
    return "noisy" in point.flags


def throttled(point: PointRecord) -> bool:
    """Whether every sample was marked (the GPU throttled): no point of a line."""
    return "throttled" in point.flags


def hollow(axes: Axes, xy: Sequence[tuple[float, float]], colour: str, marker: str,
           gid: str, size: float = 4.5) -> None:  # fmt: skip
    """Noisy points: hollow markers in the line's colour, on the line."""
    if xy:
        axes.plot(
            [x for x, _ in xy], [y for _, y in xy], linestyle="none", marker=marker,
            markersize=size, markerfacecolor="none", markeredgecolor=colour,
            markeredgewidth=1.1, zorder=3, gid=gid,
        )  # fmt: skip


def left_out(points: Iterable[PointRecord]) -> str:
    """ "left out: 3 throttled, 1 above peak": the measured points no figure draws."""
    measured = [p for p in points if p.measured]
    counts = {
        "throttled": sum(throttled(p) and p.trusted for p in measured),
        "above peak": sum(not p.trusted for p in measured),
    }
    shown = [f"{count} {what}" for what, count in counts.items() if count]
    return f"left out: {', '.join(shown)}" if shown else ""


def trust_handles(drawn: Iterable[PointRecord], points: Iterable[PointRecord]) -> list[Artist]:
    """Legend entries for what is not to be trusted: a hollow marker where a drawn point
    is noisy, and a line counting the points of ``points`` left out, where any are."""
    handles: list[Artist] = []
    if any(noisy(p) for p in drawn):
        handles.append(Line2D([], [], linestyle="none", marker="o", markerfacecolor="none",
                              markeredgecolor="0.3", label="hollow: noisy"))  # fmt: skip
    note = left_out(points)
    if note:
        handles.append(Line2D([], [], linestyle="none", label=note))
    return handles


class MinorLogLabels(Formatter):
    """Labels of a log axis's minor ticks at 2 and 5 × 10ⁿ alone, and only where the axis
    spans under two decades (beyond, its powers of ten say enough). Matplotlib's own
    label 2, 3, 4 and 6 × 10ⁿ on an axis of one to two decades: on a panel a few inches
    wide, "3×10²" and "4×10²" overlap."""

    def __call__(self, x: float, pos: int | None = None) -> str:
        low, high = sorted(self.axis.get_view_interval()) if self.axis else (0.0, 0.0)
        if x <= 0 or low <= 0 or math.log10(high / low) >= 2:
            return ""
        exponent = math.floor(math.log10(x) + 1e-9)
        mantissa = round(x / 10.0**exponent)
        return f"${mantissa}\\times10^{{{exponent}}}$" if mantissa in (2, 5) else ""
