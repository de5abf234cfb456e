"""Speed-ups against size (issue 37): each variant against its own baseline, with an
interval from the two medians' intervals, and the size from which the answer holds."""

from __future__ import annotations

import numpy as np
import pytest
from test_findings import SHAPES, _all, _point, _report_findings

from xbackend.analysis.speedups import Ratio, baselines, speedups
from xbackend.results import PointRecord


def _records(points):
    return [PointRecord.from_dict(p) for p in points]


def test_the_tiled_answer_holds_from_the_smallest_size_it_holds_at_every_larger_one():
    points = _all(seed=3)
    (opencl,) = [s for s in speedups(_records(points)) if s.label == "opencl"]
    assert (opencl.variant, opencl.baseline) == ("tiled", "naive")
    assert len(opencl.ratios) == len(SHAPES)
    for ratio in opencl.ratios:  # naive is 4× tiled, samples within 2% of it
        assert ratio.low <= ratio.value <= ratio.high
        assert ratio.low > 3.5 and ratio.high < 4.5 and ratio.verdict == "faster"
    assert opencl.holds_from() is opencl.ratios[0]


def test_an_answer_that_changes_says_from_where_it_holds(tmp_path):
    """Tiled slower at the two smallest sizes, faster from the third up."""
    rng = np.random.default_rng(4)
    points = [
        _point(rng, "opencl", variant, shape, scale=8.0 if variant == "tiled" and i < 2 else 1.0)
        for i, shape in enumerate(SHAPES)
        for variant in ("naive", "tiled")
    ]
    (found,) = speedups(_records(points))
    assert [r.verdict for r in found.ratios] == ["slower", "slower", "faster", "faster"]
    assert found.holds_from() is found.ratios[2]
    sentences = _report_findings(tmp_path, points)
    assert any(
        "faster than naive T=16 at 64×56·56×64, the largest size both measured" in s
        and "faster at every size from 48×42·42×48 up (2 of 4 sizes)" in s
        for s in sentences
    ), sentences


def test_medians_that_cannot_be_told_apart_say_so_and_name_the_last_clear_size(tmp_path):
    rng = np.random.default_rng(5)
    points = []
    for i, shape in enumerate(SHAPES):
        naive = _point(rng, "opencl", "naive", shape)
        # At the largest size tiled takes the naive kernel's own samples: a ratio of 1.
        tiled = dict(naive, variant="tiled") if i == 3 else _point(rng, "opencl", "tiled", shape)
        points += [naive, tiled]
    (found,) = speedups(_records(points))
    assert found.largest.verdict == "unclear" and found.holds_from() is None
    assert found.largest_clear() is found.ratios[2]
    sentences = _report_findings(tmp_path, points)
    assert any(
        "cannot be told apart at 64×56·56×64" in s
        and "the largest size where one is clearly faster is 48×42·42×48" in s
        for s in sentences
    ), sentences


def test_a_user_family_is_measured_against_its_own_naive_kernel():
    """student_tiled against student_naive, never against xbackend's naive."""
    assert baselines(["naive", "tiled", "student_naive", "student_tiled", "vendor"]) == {
        "tiled": "naive",
        "student_tiled": "student_naive",
    }
    assert baselines(["naive", "bob_tiled"]) == {}  # no naive of its own: no speed-up
    assert baselines(["ann_naive", "ann_tiled", "ann_tiled_x2", "bob_naive"]) == {
        "ann_tiled": "ann_naive",
        "ann_tiled_x2": "ann_naive",
    }


@pytest.mark.parametrize("noisy", ["naive", "tiled"])
def test_a_noisy_side_marks_the_ratio(noisy):
    rng = np.random.default_rng(6)
    naive = _point(rng, "opencl", "naive", SHAPES[0])
    tiled = _point(rng, "opencl", "tiled", SHAPES[0])
    (naive if noisy == "naive" else tiled)["flags"] = ["noisy"]
    ratio = Ratio.of(*_records([naive, tiled]))
    assert ratio.doubtful == ["noisy"]


def test_the_speedup_figure_draws_every_pair_and_marks_the_doubtful():
    from xbackend.figures.speedup import speedup_figure
    from xbackend.figures.style import Palette

    points = _all(seed=8)
    points[1]["flags"] = ["noisy"]  # opencl tiled at the smallest size
    records = _records(points)
    palette = Palette((p.label, p.variant, p.tile) for p in records)
    figure = speedup_figure(records, palette)
    assert figure is not None
    gids = [c[0].get_gid() for ax in figure.axes for c in ax.containers]  # the data's line
    assert gids.count("speedup:opencl:tiled:doubtful") == 1
    assert gids.count("speedup:opencl:tiled:ok") == len(SHAPES) - 1
    assert gids.count("speedup:cpu:tiled:ok") == len(SHAPES)
    one_size = [p for p in records if SHAPES[0][0] == p.M]
    assert speedup_figure(one_size, palette) is None  # a line of one point says nothing
