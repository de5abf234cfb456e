"""The audit of a pair of backends (xbackend/sweep/fairness.py): twins planned alike are FAIR; a
mismatched pair is UNFAIR with its reasons (another tile, a step more inside one side's
timed window, another clock); a ratio names what it compares; compare writes the audit."""

from __future__ import annotations

import csv
import dataclasses

import numpy as np
import pytest

from xbackend.launches.launch import KernelLaunch
from xbackend.operations import Shape
from xbackend.problems import make_operands
from xbackend.pytest_plugin import needs_backend
from xbackend.sweep import fairness

SHAPE = Shape(65, 33, 47)


@pytest.fixture(scope="module")
def pair():
    """Two OpenCL backends on this machine's device: a pair whose twins are one text."""
    needs_backend("opencl")
    import xbackend

    with xbackend.get_backend("opencl") as one, xbackend.get_backend("opencl") as other:
        yield ("left", one), ("right", other)


def test_the_same_kernels_launched_alike_are_fair(pair):
    for variant, tile in (("naive", 16), ("tiled", 16), ("tiled", 32)):
        found = fairness.audit(pair[0], pair[1], "mm", variant, tile, "float32", SHAPE)
        assert (found.verdict, found.kind, found.reasons) == ("FAIR", "kernel against kernel", ())
    vendor = fairness.audit(pair[0], pair[1], "mm", "vendor", None, "float32", SHAPE)
    assert vendor.kind == "vendor against vendor"


def test_another_tile_on_one_side_is_unfair_and_says_how(pair):
    found = fairness.audit(pair[0], pair[1], "mm", "tiled", 16, "float32", SHAPE, second_tile=32)
    assert found.verdict == "UNFAIR"
    geometry, options = found.reasons
    # The grid's x runs along N (47 columns), its y along M (65 rows).
    assert (
        geometry == "mm_tiled launched as 3×5 groups of 16×16 in left, 2×3 groups of 32×32 in right"
    )
    assert options == "mm_tiled built with -DTILE=16 in left, -DTILE=32 in right"
    assert found.line().startswith("mm tiled T=16 float32, right against left (kernel against")


def test_a_step_more_inside_one_sides_window_and_another_clock_are_unfair(pair):
    """A copy inside one side's timed window: its product runs a step more (here, the
    kernel twice), where the other's runs one; and one side timed by another clock."""
    (label, backend), (other_label, _) = pair
    A, B = make_operands(SHAPE, 0, np.dtype("float32"))
    one = backend.planned("mm", "tiled", 16, A, B)
    (launch,) = [s for s in one.steps if isinstance(s, KernelLaunch)]
    more = dataclasses.replace(one, steps=(launch, *one.steps))
    reasons = fairness.compared(
        (label, one, "globaltimer"), (other_label, more, "opencl-profiling")
    )
    assert reasons == (
        "left runs 1 steps, right 2",
        "timed by different clocks: globaltimer in left, opencl-profiling in right",
    )
    assert fairness.compared((label, one, "x"), (other_label, one, "x")) == ()


def test_kernel_against_vendor_is_named_so():
    assert fairness._kind(_product(kernel=True), _product(kernel=False)) == "kernel against vendor"
    assert fairness._kind(_product(kernel=True), _product(kernel=True)) == "kernel against kernel"


def _product(kernel: bool):
    from xbackend.launches.launch import LibraryCall, Product

    step = (KernelLaunch("k", "f", (), (1, 1, 1), (1, 1, 1), {}) if kernel
            else LibraryCall("gemm", {}))  # fmt: skip
    return Product({}, (1,), np.dtype("float32"), (step,))


@pytest.mark.slow
def test_compare_writes_the_audit_of_its_two_compiled_backends(tmp_path):
    needs_backend("opencl")
    from xbackend.cli import main

    out = tmp_path / "run"
    pytest.importorskip("pyopencl")
    import pyopencl as cl

    # The first device twice, under two labels: one machine's twins, planned alike.
    same = "opencl:0,opencl:" + cl.get_platforms()[0].get_devices()[0].name.split()[0]
    argv = ["compare", "--backends", same, "--steps", "1", "--variants", "naive,tiled",
            "--samples", "3", "--no-plots", "-q", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    rows = list(csv.DictReader((out / fairness.CSV_NAME).open()))
    assert [(r["variant"], r["verdict"], r["kind"]) for r in rows] == [
        ("naive", "FAIR", "kernel against kernel"),
        ("tiled", "FAIR", "kernel against kernel"),
    ]


def test_compare_says_the_audit_as_it_starts_and_what_it_found(pair):
    """It builds each kernel and reads its machine code (25 s for every variant on an
    H200): a line before, then the counts."""
    from xbackend.cli.compare import _audit
    from xbackend.results.plan import Plan

    said: list[str] = []
    plan = Plan(shapes=[SHAPE], variants=["naive", "tiled"])
    found = _audit(plan, list(pair), say=said.append)
    assert [a.verdict for a in found] == ["FAIR", "FAIR"]
    assert said[0] == "auditing what each pair of APIs would run (docs/fairness.md) ..."
    assert said[1].startswith("fairness of right against left, as planned at ")
    assert said[1].endswith(": 2 FAIR, 0 UNFAIR (fairness.csv)")
    assert _audit(plan, [pair[0]], say=said.append) == [] and len(said) == 2  # one: silent
