"""Kernels proven clean: every OpenCL kernel under oclgrind, and broken ones caught.

oclgrind simulates an OpenCL device and reports data races, out-of-bounds accesses
and reads of uninitialized memory. Every variant and tile size runs at small odd
sizes (scripts/kernel_probe.py) with no report; then two deliberately broken copies of
the kernels (tests/kernels/: a missing barrier, an unguarded load) must be reported.
The CUDA twins get the same treatment from compute-sanitizer on a GPU
(scripts/sanitize_cuda.sh; results in docs/sanitizers.md).

A clean run's verdict is kept in the file of verdicts (tests/conftest.py), keyed by every
case's launches, code and operands as planned on oclgrind's device: a kernel or planner
changed since is simulated again. The broken kernels are always simulated.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import probe_under_oclgrind

ROOT = Path(__file__).resolve().parent.parent
REPORT = re.compile(r"data race|Invalid (read|write)|Uninitialized value", re.IGNORECASE)


# The sizes of the simulated runs: odd, so that no dimension is a multiple of any tile and
# every edge guard runs; K = 33 > 32, so that every tile loops over K at least twice (a
# missing barrier between two trips matters), its last trip partial (33 is no multiple of
# 8, 16, 32 nor of the slabs' BK = 8). The probe's own second size, 33x70x35 (kept for
# compute-sanitizer on the GPU, docs/sanitizers.md), loops more often over the same code:
# 9 slabs of the register-blocked tiles where these take 5, at half the simulated time.
# bmm runs mm's kernels, each group offset by its batch before the same loops: mm's run
# proves the loops, and the small size (a batch of 2, every edge guard) the offsets, so
# bmm leaves out the second size, which cost a minute more. Every op's tuned variants also
# run at the probe's 66x12x72 (their unchecked 16-byte loads; for bmm, batch offsets
# that keep them aligned).
_SIZES = {"mm": "7x5x9,33x33x35", "bmm": "7x5x9", "rmm": "7x5x9,33x33x35"}

# What each operation runs at each size: mm and bmm, naive and tiled at tiles 8, 16, 32,
# reg1d, reg2d, reg2d_cf and reg2d_g4 at their two tiles each, the five tuned variants at
# 64 (warp_async with its copies as loads and stores: oclgrind has no cp.async); rmm,
# naive4, naive and tiled at 8, 16, 32, its two tuned variants at 64. Then the tuned
# variants alone at the size with an inner tile.
_CASES = {
    "mm": 2 * (3 + 3 + 2 + 2 + 2 + 2 + 5) + 5,
    "bmm": (3 + 3 + 2 + 2 + 2 + 2 + 5) + 5,
    "rmm": 2 * (3 * 3 + 2) + 2,
}


# One oclgrind process per operation, so that they run side by side (pytest-xdist).
@pytest.mark.slow
@pytest.mark.parametrize("op", list(_CASES))
def test_every_opencl_kernel_is_clean_under_oclgrind(oclgrind, op):
    # The tuned variants at their 64-wide tiles only: a simulated 256-thread work-group
    # of the 128-wide ones costs minutes. compute-sanitizer runs both on the GPU.
    done = probe_under_oclgrind(oclgrind, "--ops", op, "--sizes", _SIZES[op], "--tuned-tiles", "64")
    assert "Oclgrind Simulator" in done.stdout, done.stdout + done.stderr
    assert done.returncode == 0, done.stdout + done.stderr
    found = REPORT.search(done.stderr)
    assert found is None, done.stderr[max(0, found.start() - 200) : found.start() + 800]
    assert done.stdout.count("PASS") == _CASES[op], done.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    "broken, report",
    [("missing_barrier", "data race"), ("unguarded_load", "Invalid read")],
)
def test_oclgrind_catches_a_broken_kernel(oclgrind, broken, report):
    # The fixtures break mm.cl only; bmm runs the same kernels with a batch. Simulated
    # every time, never taken from the file: the proof that oclgrind still catches.
    kernels = str(ROOT / "tests" / "kernels" / broken)
    done = probe_under_oclgrind(
        oclgrind, "--ops", "mm,bmm", "--sizes", "9x20x11", "--tiles", "8",
        env={"XBACKEND_KERNELS": kernels}, recorded=False,
    )  # fmt: skip
    assert not done.recorded and "Oclgrind Simulator" in done.stdout, done.stdout
    assert report in done.stderr, done.stdout + done.stderr[:2000]


@pytest.mark.parametrize("broken", ["missing_barrier", "unguarded_load"])
@pytest.mark.parametrize("language, suffix", [("cuda", ".cu"), ("opencl", ".cl")])
def test_broken_kernels_differ_from_the_real_ones_only_where_broken(broken, language, suffix):
    """Each fixture is the shipped kernel with one defect: if the shipped kernel changes,
    the fixture must be made again from it, or the checks would test stale code."""
    import difflib

    real = (ROOT / "kernels" / "mm" / f"mm{suffix}").read_text().splitlines()
    fixture = (ROOT / "tests" / "kernels" / broken / language / f"mm{suffix}").read_text()
    changed = [
        line
        for line in difflib.unified_diff(real, fixture.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    assert len(changed) <= 5, "\n".join(changed)
