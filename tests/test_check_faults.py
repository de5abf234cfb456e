"""Issue 38 (reliability round 4), ``xbackend check``'s side: nothing checked is never a
pass, oclgrind's word is a variant's own and fails closed, a size with no value is one
kernel's verdict, and bad input (``--out``, ``--shapes``, no backend) is one line on
stderr before anything runs.

The kernels are files: the assignment's examples, and tests/kernels/round4/ (two
families whose kernels share a name, one writing out of bounds; a family over
oclgrind's cap of reports). Every run is seeded.
"""

from __future__ import annotations

import csv
import os
import shutil
from pathlib import Path

import pytest
from conftest import kernel_line, xbackend_here

from xbackend import families
from xbackend.grading.sanitizers import sanitize
from xbackend.pytest_plugin import needs_backend

ROOT = Path(__file__).resolve().parent.parent
STUDENT = ROOT / "examples" / "assignment" / "student"
ROUND4 = ROOT / "tests" / "kernels" / "round4"
SEED = "20261126"
QUICK = ("--backends", "opencl", "--steps", "0", "--shapes", "7x13x5,33x20x17",
         "--no-times", "--seed", SEED)  # fmt: skip


def _check(*args: str, env: dict[str, str] | None = None):
    done = xbackend_here("check", *args, env=env)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def _one_line_error(done, *words: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("xbackend: error:"), done.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])


def _student(tmp_path: Path) -> Path:
    folder = tmp_path / "student"
    shutil.copytree(STUDENT, folder)
    return folder


def _family_from_student(tmp_path: Path, name: str, manifest_edit=None, keep=(".cl",)) -> Path:
    """A family made from the student's files: ``keep`` its kernel files of these kinds,
    its manifest renamed (family and variants) and edited by ``manifest_edit``."""
    folder = tmp_path / name
    folder.mkdir()
    for suffix in keep:
        shutil.copy(STUDENT / f"student{suffix}", folder / f"{name}{suffix}")
    text = (STUDENT / "family.toml").read_text().replace("student", name)
    (folder / "family.toml").write_text(manifest_edit(text) if manifest_edit else text)
    return folder


# -- 1: a user's variant named vendor never checks the library instead --------------------------


@pytest.mark.parametrize("name", ["vendor", "tiled"])
def test_check_refuses_a_variant_named_as_a_shipped_line(name, tmp_path):
    folder = _family_from_student(
        tmp_path, "mine", lambda text: text.replace('name = "mine_naive"', f'name = "{name}"')
    )
    done = _check(str(folder), *QUICK, "--sanitize", "off")
    _one_line_error(done, str(folder / "family.toml"), f"variant '{name}'")
    assert "equal" not in done.stdout


# -- 4: nothing checked is never a pass ----------------------------------------------------------


@pytest.mark.slow
def test_a_family_no_backend_here_runs_is_nothing_checked_not_a_pass(tmp_path):
    needs_backend("opencl")
    cuda_only = _family_from_student(tmp_path, "cuda_only", keep=(".cu",))
    done = _check(str(cuda_only), *QUICK, "--sanitize", "off")
    _one_line_error(done, "nothing to check", "cuda_only_naive", "cuda")
    assert "equal" not in done.stdout
    # Beside a family that runs here: its verdicts, and the other's NOT RUN, exit 1.
    done = _check(str(cuda_only), str(_student(tmp_path)), *QUICK, "--sanitize", "off")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "opencl: equal at all 2 shapes" in kernel_line(done.stdout, "student_tiled")
    assert (
        "cuda_only_tiled: -: NOT RUN (no backend here runs it" in done.stdout
        or "cuda_only_tiled: cuda: compiles (compiled by nvcc" in done.stdout
    )


@pytest.mark.slow
@pytest.mark.parametrize("command", ["check", "compare", "limits"])
def test_a_family_with_no_kernel_file_is_refused_by_every_command(command, tmp_path):
    folder = _family_from_student(
        tmp_path, "empty", lambda text: text.replace("[family]\n", "[family]\nsources = {}\n")
    )
    if command == "check":
        done = _check(str(folder), *QUICK)
    else:  # refused as the folder is added, before anything runs
        last = ("--dry-run",) if command == "compare" else ("--budget", "0.1", "--start", "16")
        done = xbackend_here(command, "--kernels", str(folder), "--backends", "cpu", "--out",
                             str(tmp_path / "run"), *last)  # fmt: skip
    _one_line_error(done, str(folder / "family.toml"), "names no kernel file")


# -- 6, 7: oclgrind's reports are a variant's own, and a variant it did not finish is not run ----


@pytest.mark.slow
@pytest.mark.parametrize("order", ["bad first", "good first"])
def test_a_report_falls_on_its_own_family_not_on_a_kernel_of_the_same_name(order, oclgrind):
    needs_backend("opencl")
    folders = [str(ROUND4 / "same_name_bad"), str(ROUND4 / "same_name_good")]
    if order == "good first":
        folders.reverse()
    done = _check(*folders, *QUICK, "--sanitize", "on")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "same_bad: opencl: WRONG under oclgrind (Invalid write" in done.stdout
    assert "bad.cl line" in done.stdout
    assert "NOT RUN (not run natively: it writes out of bounds" in done.stdout
    assert kernel_line(done.stdout, "same_good") == "    same_good: opencl: equal at all 2 shapes"


@pytest.mark.slow
def test_past_oclgrinds_cap_a_kernel_that_writes_out_of_bounds_is_not_run(oclgrind, tmp_path):
    """cap_reads fills oclgrind's default cap of 1000 reports; cap_writes, checked after
    it, writes out of bounds: found, and not run natively. The cap is raised, and each
    variant runs alone: cap_reads is found too, for its reads out of bounds."""
    needs_backend("opencl")
    done = _check(str(ROUND4 / "capped"), *QUICK, "--sanitize", "on", "--out", str(tmp_path))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "cap_writes: WRONG under oclgrind (Invalid write" in done.stdout
    rows = list(csv.DictReader((tmp_path / "check.csv").open()))
    for variant in ("cap_reads", "cap_writes"):
        native = [row for row in rows if row["backend"] == "opencl" and row["variant"] == variant]
        assert [(row["M"], row["verdict"]) for row in native] == [("", "NOT RUN")], native
    assert "cap_reads: WRONG under oclgrind (Invalid read" in done.stdout
    assert "it reads out of bounds under oclgrind" in done.stdout  # cap_reads: why not run


@pytest.fixture
def student_catalogue(tmp_path, own_families):
    folder = _student(tmp_path)
    families.add_folders([folder])
    return folder


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "words"),
    [("sleep", "more than 3 s"), ("crash", "simulated internal error"), ("cap", "cap of errors")],
)
def test_a_variant_oclgrind_did_not_finish_is_unfinished(
    mode, words, student_catalogue, monkeypatch
):
    """A stand-in for oclgrind that hangs, dies of a signal, or reaches its cap: the
    variant is not proven clean, whatever its verdicts say."""
    needs_backend("opencl")
    monkeypatch.setenv("FAKE_OCLGRIND", mode)
    deadline = 3 if mode == "sleep" else 120  # the others run a check: seconds, loaded
    done = sanitize([str(student_catalogue)], "student_naive", str(ROUND4 / "fake_oclgrind.sh"),
                    int(SEED), timeout_s=deadline)  # fmt: skip
    assert done.finding is None and words in done.unfinished, done


@pytest.mark.slow
def test_check_never_runs_natively_what_oclgrind_did_not_finish(tmp_path):
    needs_backend("opencl")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "oclgrind").symlink_to(ROUND4 / "fake_oclgrind.sh")
    env = {"PATH": f"{fake}{os.pathsep}{os.environ['PATH']}", "FAKE_OCLGRIND": "crash"}
    done = _check(str(_student(tmp_path)), *QUICK, "--sanitize", "on", env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    for variant in ("student_naive", "student_tiled"):
        said = "NOT RUN (not run natively: oclgrind did not finish checking it (oclgrind ended"
        assert f"opencl {variant}: {said}" in done.stdout
        assert f"opencl {variant} at" not in done.stdout and "equal" not in done.stdout


# -- 8: a size with no value at the tile is that kernel's verdict; the others' stand -------------


@pytest.mark.slow
@pytest.mark.parametrize("build", ['"TILE / 0"', '"TILE / 3"', '"TILE % (TILE - TILE)"'])
def test_a_build_with_no_value_is_one_kernels_verdict(build, tmp_path):
    needs_backend("opencl")
    broken = _family_from_student(
        tmp_path, "broken", lambda text: text.replace('"TILE" }', f'"TILE", SPLIT = {build} }}')
    )
    done = _check(str(broken), str(_student(tmp_path)), *QUICK, "--sanitize", "off")
    assert done.returncode == 1, done.stdout + done.stderr
    for variant in ("broken_naive", "broken_tiled"):
        assert "opencl: NOT RUN (tile 16:" in kernel_line(done.stdout, variant)
    assert str(broken / "family.toml") in done.stdout
    assert "opencl: equal at all 2 shapes" in kernel_line(done.stdout, "student_naive")


# -- 9, 21: --out checked first and written safely; bad input is one line on stderr -------------


@pytest.mark.parametrize("target", ["existing", "dangling"])
def test_a_link_at_check_csv_is_refused_before_anything_runs(target, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    elsewhere = tmp_path / "elsewhere.csv"
    if target == "existing":
        elsewhere.write_text("keep me\n")
    (out / "check.csv").symlink_to(elsewhere)
    done = _check(str(_student(tmp_path)), *QUICK, "--out", str(out))
    _one_line_error(done, "check.csv", "symbolic link")
    assert "checking" not in done.stdout
    if target == "existing":
        assert elsewhere.read_text() == "keep me\n"
    else:
        assert not elsewhere.exists()


@pytest.mark.slow
def test_check_csv_is_written_whole_with_every_verdict(tmp_path):
    needs_backend("opencl")
    out = tmp_path / "out"
    done = _check(str(_student(tmp_path)), *QUICK, "--sanitize", "off", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    rows = list(csv.DictReader((out / "check.csv").open()))
    native = [row for row in rows if row["backend"] == "opencl"]
    assert len(native) == 4 and {row["verdict"] for row in native} == {"equal"}
    assert {row["submission"] for row in rows} == {"student"}
    assert {row["verdict"] for row in rows if row["backend"] != "opencl"} <= {"compiles"}  # nvcc
    written = sorted(p.name for p in out.iterdir())  # no temporary file left
    assert written == ["check.csv", "gradebook.csv", "gradebook.html", "submissions"]


def test_an_out_that_cannot_be_a_folder_is_refused_before_anything_runs(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    done = _check(str(_student(tmp_path)), *QUICK, "--out", str(blocker / "under"))
    _one_line_error(done, str(blocker))
    assert "checking" not in done.stdout


@pytest.mark.parametrize(
    "shape", ["100000x100000x100000", "1x1099511627776x1", "7x13x5,65536x65536x65536"]
)
def test_a_shape_too_large_to_check_is_refused_by_name(shape, tmp_path):
    done = _check(str(_student(tmp_path)), "--shapes", shape, "--steps", "0", "--no-times")
    _one_line_error(done, "--shapes", "GB of host memory")
    assert "checking" not in done.stdout


def test_no_backend_to_run_kernels_on_is_said_on_stderr(tmp_path):
    done = _check(str(_student(tmp_path)), "--backends", "cpu", "--steps", "0")
    _one_line_error(done, "no CUDA or OpenCL backend")
    assert "no CUDA or OpenCL" not in done.stdout


def test_variants_names_only_the_folders_own(tmp_path):
    done = _check(str(_student(tmp_path)), *QUICK, "--variants", "naive")
    _one_line_error(done, "--variants", "no variant naive", "student_naive, student_tiled")
