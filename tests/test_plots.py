"""The figures' look: one colour per variant everywhere, one line style per meaning,
legends off the data, the output's size on the x axis, bars for a single size."""

from __future__ import annotations

import dataclasses
import warnings

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex

from xbackend.figures import plots
from xbackend.figures.style import VARIANT_COLOURS
from xbackend.results import PointRecord

LADDER = ("reg1d", "reg2d", "reg2d_cf", "reg2d_g4", "vec4", "vec4_db", "warp", "warp_db")
VARIANTS = ("naive", "tiled", "vendor", *LADDER)


def point(variant, n, *, label="opencl", tile=16, op="mm", dtype="float32", status="ok"):
    seconds = 1e-6 * n * (2 if variant == "naive" else 1)
    stats = {"median": seconds, "q1": seconds * 0.9, "q3": seconds * 1.1, "min": seconds}
    return PointRecord(
        run_id="r", backend=label.split(":")[0], label=label, device="dev", variant=variant,
        tile=None if variant == "vendor" else tile, dtype=dtype, M=n, K=n, N=n,
        flops=2 * n**3, status=status, op=op, kernel_s=stats, end_to_end_s=stats, gflops=1.0,
    )  # fmt: skip


def run(variants=VARIANTS, sizes=(16, 32, 64), labels=("cpu", "opencl"), **kw):
    return [point(v, n, label=b, **kw) for b in labels for v in variants for n in sizes]


def drawn(points):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "tight layout not applied", no collapsed axes
        found = dict(plots.figures(points))
        for figure in found.values():
            FigureCanvasAgg(figure).draw()
    return found


def kernel_colours(figure):
    colours: dict[str, set[str]] = {}
    for axes in figure.axes:
        for line in axes.get_lines():
            gid = line.get_gid() or ""
            if gid.startswith("kernel:"):
                colours.setdefault(gid[7:], set()).add(to_hex(line.get_color()))
    return colours


@pytest.mark.slow
def test_a_variant_has_one_colour_in_every_panel_and_figure_and_no_two_share_one():
    figures = drawn(run())
    assert set(figures) == {"runtime_by_backend", "runtime_all", "gflops", "ladder", "speedup"}
    seen: dict[str, set[str]] = {}
    for figure in figures.values():
        for variant, colours in kernel_colours(figure).items():
            seen.setdefault(variant, set()).update(colours)
    assert set(seen) == set(VARIANTS)
    assert all(len(colours) == 1 for colours in seen.values()), seen
    assert len({next(iter(c)) for c in seen.values()}) == len(VARIANTS)
    assert len(set(VARIANT_COLOURS.values())) == len(VARIANT_COLOURS) >= 12


@pytest.mark.slow
def test_the_assignment_figure_shows_naive_tiled_and_vendor_and_the_ladder_its_own():
    figures = drawn(run())
    assert set(kernel_colours(figures["runtime_by_backend"])) == {"naive", "tiled", "vendor"}
    assert set(kernel_colours(figures["ladder"])) == set(VARIANTS)


@pytest.mark.slow
def test_kernel_solid_end_to_end_dotted_vendor_dashed():
    figure = drawn(run())["runtime_by_backend"]
    styles = {
        line.get_gid(): line.get_linestyle()
        for axes in figure.axes
        for line in axes.get_lines()
        if line.get_gid()
    }
    assert styles["kernel:naive"] == styles["kernel:tiled"] == "-"
    assert styles["kernel:vendor"] == "--"
    assert {styles[f"end_to_end:{v}"] for v in ("naive", "tiled", "vendor")} == {":"}


@pytest.mark.slow
def test_the_legend_is_off_the_data():
    for figure in drawn(run()).values():
        renderer = figure.canvas.get_renderer()
        (legend,) = figure.legends
        box = legend.get_window_extent(renderer)
        for axes in figure.axes:
            assert not box.overlaps(axes.get_window_extent(renderer))


@pytest.mark.slow
def test_tiles_of_one_variant_are_told_apart_by_shade():
    points = run(("tiled",), labels=("opencl",), tile=8) + run(("tiled",), labels=("opencl",))
    colours = kernel_colours(drawn(points)["runtime_all"])["tiled"]
    assert len(colours) == 2


@pytest.mark.slow
def test_rmm_points_sit_at_the_outputs_size():
    figure = drawn(run(("naive", "tiled"), sizes=(64, 128), op="rmm"))["runtime_all"]
    (axes,) = figure.axes
    xs = {tuple(line.get_xdata()) for line in axes.get_lines() if line.get_gid()}
    assert xs == {(32 * 32, 64 * 64)}
    assert axes.get_xlabel() == "output elements (M/2)·(N/2)"


@pytest.mark.slow
def test_one_size_is_drawn_as_bars_with_a_legend_that_fits():
    points = [
        point(v, 256, label=b, dtype=d, op=op)
        for b in ("cpu", "opencl")
        for v in VARIANTS
        for d in ("int32", "float32", "float64")
        for op in ("mm", "bmm")
    ]
    figures = drawn(points)
    figure = figures["runtime_by_backend"]
    bars = [
        p for axes in figure.axes for p in axes.patches if (p.get_gid() or "").startswith("bar:")
    ]
    assert len(bars) == len(points)
    (legend,) = figure.legends
    assert len(legend.get_texts()) == len(VARIANTS)
    colours = {p.get_gid(): to_hex(p.get_facecolor()) for p in bars}
    assert len(set(colours.values())) == len(VARIANTS)


@pytest.mark.slow
@pytest.mark.parametrize("count", [1, 3])
def test_a_figure_has_no_tight_layout_warning(count):
    drawn(run(("naive", "tiled"), sizes=(16, 32), labels=("cpu", "opencl", "cuda")[:count]))


@pytest.mark.slow
def test_points_above_the_devices_peak_are_left_out_of_the_figures():
    points = run(("naive", "tiled"), labels=("opencl",))
    flagged = [
        dataclasses.replace(p, flags=["above-peak-compute"]) if p.variant == "tiled" else p
        for p in points
    ]
    figure = drawn(flagged)["runtime_all"]
    assert set(kernel_colours(figure)) == {"naive"}
    with pytest.raises(ValueError, match="2 timed above the device's peak"):
        plots.figures([dataclasses.replace(p, flags=["above-peak-bandwidth"]) for p in points[:2]])


@pytest.mark.slow
def test_a_cache_mode_other_than_warm_is_named_in_the_title():
    points = run(("naive", "tiled"), labels=("opencl",))
    warm = drawn(points)["runtime_all"].get_suptitle()
    assert "cache" not in warm
    cold = [dataclasses.replace(p, cache="cold") for p in points]
    assert "cache: cold" in drawn(cold)["runtime_all"].get_suptitle()
    mixed = [dataclasses.replace(p, cache="hot") for p in points[:3]] + points[3:]
    assert "cache modes: hot, warm" in drawn(mixed)["gflops"].get_suptitle()
    one_size = [dataclasses.replace(p, cache="cold") for p in run(sizes=(64,))]
    assert "cache: cold" in drawn(one_size)["runtime_by_backend"].get_suptitle()


@pytest.mark.slow
def test_a_users_kernels_are_drawn_beside_naive_and_tiled():
    """A user's variants (--kernels) are lines of the assignment's figures, not rungs of
    the ladder; the shipped rungs keep the ladder."""
    figures = drawn(run(variants=("naive", "tiled", "mine_naive", "mine_tiled", "reg2d")))
    wanted = {"naive", "tiled", "mine_naive", "mine_tiled"}
    assert set(kernel_colours(figures["runtime_by_backend"])) == wanted
    assert set(kernel_colours(figures["runtime_all"])) == wanted
    assert set(kernel_colours(figures["ladder"])) == {*wanted, "reg2d"}
