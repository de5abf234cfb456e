"""Size schedules and timing statistics."""

from __future__ import annotations

import pytest

from xbackend.measuring.timing import Stats, format_seconds
from xbackend.problems import Shape
from xbackend.sweep.sizes import DEFAULT_BASE, DEFAULT_STEPS, growth, parse_shape, parse_shapes


def test_default_schedule_is_the_assignments():
    shapes = growth(DEFAULT_BASE, DEFAULT_STEPS)
    assert len(shapes) == 38
    assert shapes[0] == Shape(16, 14, 16)
    assert shapes[-1] == Shape(608, 532, 608)


@pytest.mark.parametrize(
    "text, shape",
    [("16x14", Shape(16, 14, 16)), ("8×6×4", Shape(8, 6, 4)), (" 3 x 5 ", Shape(3, 5, 3))],
)
def test_parse_shape(text, shape):
    assert parse_shape(text) == shape


@pytest.mark.parametrize("text", ["", "16", "0x5", "axb", "1x2x3x4", "-4x4"])
def test_bad_shapes_are_errors(text):
    with pytest.raises(ValueError, match="size"):
        parse_shape(text)


def test_parse_lists():
    assert parse_shapes("16x14,32x28 64x64x8") == [
        Shape(16, 14, 16),
        Shape(32, 28, 32),
        Shape(64, 64, 8),
    ]


def test_stats_median_and_quartiles():
    stats = Stats.of([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (stats.n, stats.median, stats.q1, stats.q3) == (5, 3.0, 2.0, 4.0)
    assert (stats.min, stats.max, stats.mean) == (1.0, 5.0, 3.0)
    assert stats.spread == pytest.approx(2.0 / 3.0)
    assert (stats.ci_low, stats.ci_high) == (1.0, 5.0)  # five samples: the range (94%)
    single = Stats.of([0.25])
    assert single.q1 == single.q3 == single.median == 0.25
    with pytest.raises(ValueError):
        Stats.of([])


def test_format_seconds():
    assert format_seconds(1.5) == "1.5 s"
    assert format_seconds(0.00123) == "1.23 ms"
    assert format_seconds(2.5e-6) == "2.5 µs"
