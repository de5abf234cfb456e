"""A sanitizer that says what it did not do (``grading/sanitizers.py``, issue 52.7).

A kernel oclgrind cannot run (tests/kernels/subgroups: ``sub_group_all``, which oclgrind
21.10 does not simulate) or one too large to simulate (tests/kernels/fixed_size: 4096³)
is "not sanitized", with why, in the terminal and in the gradebook, and still checked
natively; oclgrind's deadline is on CPU time and scales with the work at the shapes it
runs, so a loaded machine gives its run more time on the clock, not another verdict.
"""

from __future__ import annotations

import csv
import shutil
import time
from pathlib import Path

import pytest
from conftest import xbackend_here

from xbackend import families
from xbackend.grading import sanitizers
from xbackend.grading.sanitizers import SHAPES, cpu_deadline_s, sanitize
from xbackend.operations import Shape
from xbackend.pytest_plugin import needs_backend

KERNELS = Path(__file__).parent / "kernels"
SEED = 20261128
SUBGROUPS = "oclgrind could not run it (Undefined external function: sub_group_all)"


def test_the_cpu_deadline_scales_with_the_work_at_the_shapes():
    """60 s of CPU for the start, 40 µs for each multiply-add of the shapes run: the
    sanitizers' two small shapes are given 60.5 s; 128³ is given 144 s."""
    assert cpu_deadline_s(SHAPES) == pytest.approx(60 + 40e-6 * (7 * 13 * 5 + 33 * 20 * 17))
    assert cpu_deadline_s([Shape(128, 128, 128)]) == pytest.approx(60 + 40e-6 * 128**3)


def test_a_kernel_too_large_to_simulate_is_not_sanitized_and_says_so(own_families):
    """Its rule takes 4096³ only: oclgrind would need weeks; the run is not made."""
    families.add_folders([str(KERNELS / "fixed_size")])
    done = sanitize([str(KERNELS / "fixed_size")], "fixed_size_naive", "oclgrind", SEED)
    assert done.runs_natively and done.finding is None and not done.unfinished
    assert done.skipped == (
        "oclgrind would need about 32 days of CPU time at 4096×4096·4096×4096 (the shape "
        "its rules take; a run is given at most 10 min)"
    )


@pytest.mark.slow
def test_a_kernel_oclgrind_cannot_run_is_not_sanitized_in_its_own_words(oclgrind, own_families):
    needs_backend("opencl")
    families.add_folders([str(KERNELS / "subgroups")])
    done = sanitize([str(KERNELS / "subgroups")], "subgroups_naive", oclgrind, SEED)
    assert (done.finding, done.unfinished, done.skipped) == (None, "", SUBGROUPS)
    assert done.runs_natively


@pytest.mark.slow
def test_a_kernel_not_sanitized_says_so_in_the_terminal_and_the_gradebook(oclgrind, tmp_path):
    """Equal natively, and never only "equal": the summary line and the gradebook's
    finding say it was not sanitized, and why."""
    needs_backend("opencl")
    out = tmp_path / "out"
    done = xbackend_here("check", str(KERNELS / "subgroups"), "--backends", "opencl",
                         "--steps", "0", "--shapes", "7x13x5,33x20x17", "--no-times",
                         "--seed", str(SEED), "--sanitize", "on", "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"  oclgrind subgroups_naive: not sanitized: {SUBGROUPS}\n" in done.stdout
    assert (
        f"opencl subgroups_naive: not sanitized: {SUBGROUPS}; equal at all 2 shapes" in done.stdout
    )
    rows = list(csv.DictReader((out / "gradebook.csv").open()))
    assert [(r["verdict"], r["finding"]) for r in rows] == [
        ("equal", f"oclgrind: not sanitized: {SUBGROUPS}")
    ]


@pytest.mark.slow
def test_a_run_past_its_cpu_deadline_is_unfinished_by_its_cpu_time(
    oclgrind, own_families, monkeypatch
):
    """A kernel that never returns spends CPU under oclgrind until its CPU deadline (5 s
    here): its verdict names the CPU time it used, the same on an idle and a loaded
    machine, where a deadline on the clock came sooner or later."""
    needs_backend("opencl")
    monkeypatch.setattr(sanitizers, "BASE_CPU_S", 5.0)
    folder = KERNELS / "round4_isolation"
    families.add_folders([str(folder)])
    done = sanitize([str(folder)], "iso_hang", oclgrind, SEED)
    assert done.unfinished == "its run at 7×13·13×5 used its 5 s of CPU time"
    assert not done.runs_natively


def test_a_copy_of_a_kernel_of_one_size_small_enough_is_sanitized_at_its_size(
    tmp_path, own_families, monkeypatch
):
    """The same kernel built for 40: oclgrind is asked to run it at 40³, the shape its
    rule takes, within a CPU deadline made for that shape (the run itself stopped here)."""
    folder = tmp_path / "fixed_size"
    shutil.copytree(KERNELS / "fixed_size", folder)
    manifest = folder / "family.toml"
    manifest.write_text(manifest.read_text().replace("4096", "40"))
    families.add_folders([str(folder)])
    seen: dict[str, object] = {}

    def under(*args, **kwargs):
        seen.update(cpu_s=args[8], shapes=list(args[9]))
        raise RuntimeError("stop")

    monkeypatch.setattr(sanitizers, "_under", under)
    with pytest.raises(RuntimeError, match="stop"):
        sanitize([str(folder)], "fixed_size_naive", "oclgrind", SEED)
    assert seen == {"cpu_s": cpu_deadline_s([Shape(40, 40, 40)]), "shapes": [Shape(40, 40, 40)]}


@pytest.mark.slow
def test_a_kernel_whose_own_build_fails_is_not_said_unsanitized(oclgrind, own_families):
    """examples/class/oscar's syntax error fails under oclgrind and on the device alike:
    it is the kernel's error, which its native check says; oclgrind did not skip it."""
    needs_backend("opencl")
    folder = Path(__file__).resolve().parent.parent / "examples" / "class" / "oscar"
    families.add_folders([str(folder)])
    done = sanitize([str(folder)], "oscar_naive", oclgrind, SEED)
    assert (done.finding, done.unfinished, done.skipped) == (None, "", "")


def _lingering() -> list[str]:
    """This machine's processes running ``sleep 601`` (the fake oclgrind's own child)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            line = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
        except OSError:
            continue
        if line == b"sleep\x00601\x00":
            found.append(entry.name)
    return found


def test_at_its_deadline_a_sanitizers_run_leaves_no_process_behind(own_families, monkeypatch):
    """A stand-in for oclgrind that waits on a process of its own: at the clock's deadline
    the run's whole session is killed, its child too (it used to be left, reparented)."""
    folder = Path(__file__).resolve().parent.parent / "examples" / "assignment" / "student"
    families.add_folders([str(folder)])
    monkeypatch.setenv("FAKE_OCLGRIND", "linger")
    fake = str(KERNELS / "round4" / "fake_oclgrind.sh")
    done = sanitize([str(folder)], "student_naive", fake, SEED, timeout_s=2)
    assert done.unfinished == "oclgrind took more than 2 s"
    for _ in range(20):  # a killed process is gone once it is reaped
        if not _lingering():
            break
        time.sleep(0.25)
    assert _lingering() == []


@pytest.mark.slow
def test_a_kernel_its_rules_never_take_is_not_said_unsanitized(oclgrind, tmp_path, own_families):
    """Built for 100000³, past the largest shape a check makes: no shape its rules take, at
    which the native check says which rule; oclgrind's run is not "not sanitized" too."""
    needs_backend("opencl")
    folder = tmp_path / "fixed_size"
    shutil.copytree(KERNELS / "fixed_size", folder)
    manifest = folder / "family.toml"
    manifest.write_text(manifest.read_text().replace("4096", "100000"))
    families.add_folders([str(folder)])
    done = sanitize([str(folder)], "fixed_size_naive", oclgrind, SEED)
    assert (done.finding, done.unfinished, done.skipped) == (None, "", "")


def test_a_tools_output_is_kept_to_its_bounds(monkeypatch):
    """A kernel that printf's in a loop under oclgrind: the submission's process held all
    of it (1 GB in round 5's second look). Each stream keeps its first and last bytes and
    says how many it left out between."""
    import sys

    import numpy as np

    from xbackend.grading import deadlines

    monkeypatch.setattr(deadlines, "OUTPUT_HEAD_BYTES", 64 << 10)
    monkeypatch.setattr(deadlines, "OUTPUT_TAIL_BYTES", 16 << 10)
    rng = np.random.default_rng(5411)
    lines = int(rng.integers(40_000, 60_000))
    said = f"for i in range({lines}): print(f'line {{i:06d}}', flush=False)"
    done = deadlines.run_to_deadline([sys.executable, "-c", said], 60)
    written = lines * len("line 000000\n")
    kept = (64 << 10) + (16 << 10)
    assert done.returncode == 0 and done.stdout.startswith("line 000000\n")
    assert done.stdout.endswith(f"line {lines - 1:06d}\n")
    assert f"\n[{written - kept} bytes of output left out here]\n" in done.stdout
    assert len(done.stdout) < kept + 100
