"""Which shapes a kernel is checked and timed at (``grading/shapes.py``): the nearest its
manifest's rules take, a kernel of one size at that size (tests/kernels/fixed_size: its
rule is ``M == N == K == 4096``; the end-to-end test checks a copy built for 40).
"""

from __future__ import annotations

import csv
import re
import shutil
from pathlib import Path

import pytest
from conftest import xbackend_here

from xbackend import families
from xbackend.families.manifest import load
from xbackend.grading.checking import EDGE_SHAPES, schedule
from xbackend.grading.shapes import rule_shape, taken_shapes
from xbackend.operations import Shape
from xbackend.pytest_plugin import needs_backend

KERNELS = Path(__file__).parent / "kernels"
STYLES = Path(__file__).resolve().parent.parent / "examples" / "styles"


def _spec(folder: Path, variant: str) -> families.VariantSpec:
    return {spec.name: spec for _, spec in load(folder).variants}[variant]


def test_a_kernel_of_one_size_is_checked_at_that_size_whatever_was_asked():
    spec = _spec(KERNELS / "fixed_size", "fixed_size_naive")
    assert rule_shape(spec, 1, 1, 1) == (4096, 4096, 4096)
    asked = [*EDGE_SHAPES, *schedule(38)]
    assert taken_shapes(spec, asked) == [Shape(4096, 4096, 4096)]


def test_the_size_may_be_a_constant_of_the_manifest(tmp_path):
    """``requires = ["M == N", "N == K", "K == SIZE"]`` with ``constants = { SIZE = 96 }``:
    the rule names 96 by a name; the nearest shape is made of it."""
    folder = tmp_path / "fixed_size"
    shutil.copytree(KERNELS / "fixed_size", folder)
    manifest = folder / "family.toml"
    text = manifest.read_text().replace('"M == N == K == 4096"', '"M == N", "N == K", "K == SIZE"')
    manifest.write_text(text.replace("[family]\n", "[family]\nconstants = { SIZE = 96 }\n"))
    spec = _spec(folder, "fixed_size_naive")
    assert taken_shapes(spec, [Shape(7, 13, 5), Shape(300, 2, 9)]) == [Shape(96, 96, 96)]


def test_a_rule_the_rounding_meets_keeps_the_nearest_shape():
    """``K % TS == 0``: each shape with K rounded up to a multiple of the tile, as before
    (``element.fitted``); a shape that already holds stays."""
    spec = _spec(STYLES / "width_define", "width_define_kmultiple")
    tile = spec.defaults.get("TS") or spec.default_tile
    assert tile is not None
    for shape in taken_shapes(spec, [Shape(7, 13, 5), Shape(33, 20, 17)]):
        assert shape.K % tile == 0 and shape.K >= 13
    assert taken_shapes(spec, [Shape(7, 32, 5)]) == [Shape(7, 32, 5)]


@pytest.mark.slow
def test_check_runs_and_times_a_kernel_of_one_size_at_its_size(tmp_path):
    """By default (no --shapes): checked at its size, equal, and timed there; before, it
    was NOT RUN at 1×1 with the rule, and never timed."""
    needs_backend("opencl")
    folder = tmp_path / "fixed_size"
    shutil.copytree(KERNELS / "fixed_size", folder)
    manifest = folder / "family.toml"
    manifest.write_text(manifest.read_text().replace("4096", "40"))
    out = tmp_path / "out"
    done = xbackend_here("check", str(folder), "--steps", "2", "--sanitize", "off",
                         "--seed", "20261128", "--out", str(out))  # fmt: skip
    # nvcc, where it is and no GPU is, builds it at 40 too: exit 0, not "does not compile"
    assert done.returncode == 0, done.stdout + done.stderr
    # timed at its size, not at the assignment's largest (32×28·28×32), and said so
    assert re.search(r"fixed_size_naive +\S+ \S+ ±\S+ \(.*\) at 40×40·40×40\n", done.stdout)
    rows = [r for r in csv.DictReader((out / "check.csv").open()) if r["backend"] == "opencl"]
    assert [(r["M"], r["K"], r["N"], r["verdict"]) for r in rows] == [("40", "40", "40", "equal")]
    book = [r for r in csv.DictReader((out / "gradebook.csv").open()) if r["backend"] == "opencl"]
    assert [(r["verdict"], bool(r["time_s"])) for r in book] == [("equal", True)], book


@pytest.mark.slow
def test_past_its_deadline_at_the_shape_its_rules_take_the_verdict_says_its_work():
    """A kernel of one size (4096) given 0.05 s, too little on any device. Its verdict
    says the deadline passed there, and that it is the shape its rules take, with its
    work: what a slow device gives too, which the student reads apart from a hang at a
    shape asked."""
    needs_backend("opencl")
    done = xbackend_here("check", str(KERNELS / "fixed_size"), "--backends", "opencl",
                         "--steps", "0", "--no-times", "--sanitize", "off",
                         "--kernel-timeout", "0.05", "--seed", "20261128")  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        "(4096×4096·4096×4096 is the shape its rules take: 68,719,476,736 multiply-adds, "
        "perhaps too many to check on this device in that time)" in done.stdout
    ), done.stdout
