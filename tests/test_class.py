"""Issue 39: a class in one call. ``xbackend check CLASS`` gives each submission of
examples/class (30 students' kernels, written in their own styles, each folder's kinds in
examples/class/expected.csv) its right verdict, each in a process of its own; names the
submissions share are said once; the gradebook is written as each submission finishes,
so a check killed midway keeps what it graded.

The class runs on whatever is here: OpenCL (Intel's CPU runtime, or a GPU's), oclgrind
where installed, nvcc where installed, CUDA on a GPU machine. The expectations follow:
on a machine without CUDA, a .cu file is only built (``compiles``), or refused by nvcc.
"""

from __future__ import annotations

import csv
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, _available, xbackend_here

from xbackend.grading import compilers, gradebook, pages, records, submissions
from xbackend.grading.records import Records, Timing, Verdict
from xbackend.operations import Shape
from xbackend.pytest_plugin import needs_backend

CLASS = ROOT / "examples" / "class"
SEED = ("--seed", "20261127")
# One submission of every kind of examples/class/README.md (the others are more of the same).
KINDS = ("alice", "ben", "erin", "frank", "grace", "heidi", "ivan", "judy", "kevin",
         "laura", "mallory", "nina", "oscar", "peggy", "quentin", "yvonne")  # fmt: skip


def _expected() -> dict[tuple[str, str, str], tuple[str, str]]:
    """(submission, language, variant) -> (verdict, kind), as expected.csv says."""
    with (CLASS / "expected.csv").open() as stream:
        return {(r["submission"], r["language"], r["variant"]): (r["verdict"], r["kind"])
                for r in csv.DictReader(stream)}  # fmt: skip


def _class_of(tmp_path: Path, names: tuple[str, ...]) -> Path:
    folder = tmp_path / "class"
    folder.mkdir()
    for name in names:
        shutil.copytree(CLASS / name, folder / name)
    return folder


def _right(
    expected: tuple[str, str], language: str, cuda_here: bool, verdict: str, finding: str
) -> bool:
    """Whether ``verdict`` is right for a row ``expected`` on this machine: where no CUDA
    device is here, a .cu file is built by nvcc (``compiles``), or refused by it (its syntax
    error: NOT RUN), or not looked at (no nvcc: NOT RUN). A race no sanitizer watched
    (NVIDIA's OpenCL has none) may give the right result at the few shapes checked here."""
    want, kind = expected
    if "crashes" in kind and verdict == "NOT RUN":  # no sanitizer to see it first
        return True
    if "barrier" in kind and verdict == "equal" and not finding:  # a race unwatched
        return True
    if language != "cuda" or cuda_here:
        return verdict == want
    if "syntax" in kind or not compilers.nvcc():
        return verdict == "NOT RUN"
    return verdict == "compiles"


@pytest.fixture(scope="module")
def graded(tmp_path_factory, request):
    """The class of ``KINDS`` checked in one call, two at a time: what it said and its
    gradebook's rows. Without a GPU, the OpenCL kernels need oclgrind for their verdicts
    (a race on a CPU may give the right result); on a GPU, compute-sanitizer and the GPU's
    own races give them."""
    needs_backend("opencl")
    if not _available("cuda"):
        request.getfixturevalue("oclgrind")  # skips where it is not installed
    folder = _class_of(tmp_path_factory.mktemp("graded"), KINDS)
    out = folder.parent / "grades"
    # A deadline a loaded 2-core machine's builds keep within: at 8 s, with another suite
    # beside CI's two workers (load 5), a correct kernel's build ran past it ("does not build").
    done = xbackend_here("check", str(folder), "--steps", "1", "--no-times", "--out", str(out),
                         "--kernel-timeout", "20", "--jobs", "2", *SEED)  # fmt: skip
    rows = list(csv.DictReader((out / "gradebook.csv").open()))
    return done, rows, out


@pytest.mark.slow
@pytest.mark.xdist_group("test_class_graded")  # one class run for both
def test_a_class_gets_every_submissions_verdict_in_one_call(graded):
    """Every kind of submission, in one call: each row of the gradebook as expected.csv
    says (the CUDA rows as this machine can check them), every submission's page."""
    done, rows, out = graded
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert {row["submission"] for row in rows} == set(KINDS)
    cuda_here = any(row["backend"] == "cuda" and row["shapes"] for row in rows)
    expected = _expected()
    wrong = []
    for row in rows:
        if row["backend"] not in ("cuda", "opencl"):
            continue
        want = expected[row["submission"], row["backend"], row["variant"]]
        if not _right(want, row["backend"], cuda_here, row["verdict"], row["finding"]):
            wrong.append((row["submission"], row["backend"], row["variant"], want, row["verdict"],
                          row["finding"] or row["detail"]))  # fmt: skip
    assert not wrong, wrong
    # Every kernel expected on OpenCL has its row: none left out unseen.
    opencl = {(s, v) for (s, lang, v) in expected if lang == "opencl" and s in KINDS}
    assert opencl <= {(r["submission"], r["variant"]) for r in rows if r["backend"] == "opencl"}
    for name in KINDS:
        assert (out / "submissions" / pages.page_name(name)).is_file()


@pytest.mark.slow
@pytest.mark.xdist_group("test_class_graded")  # one class run for both
def test_what_a_teacher_reads_says_what_to_fix(graded):
    """The race, the transposed B, the dropped tile, the launch that left rows unwritten,
    the out-of-bounds write with its file and line: each in the submission's words (as
    oclgrind and the CPU say them: on a GPU, compute-sanitizer and the red zone do)."""
    _, rows, _ = graded
    if _available("cuda"):
        pytest.skip("the words checked here are oclgrind's and the CPU runtime's")
    said = {(r["submission"], r["variant"]): r for r in rows if r["backend"] == "opencl"}
    assert "data race" in said["ben", "ben_tiled"]["finding"]
    assert "ben.cl line" in said["ben", "ben_tiled"]["finding"]
    assert "tile of K" in said["erin", "student_tiled"]["detail"]
    frank = said["frank", "frank_naive"]
    assert "Invalid write" in frank["finding"] and "frank.cl line" in frank["finding"]
    assert "writes out of bounds" in frank["detail"] and frank["verdict"] == "WRONG"
    assert "B is read transposed" in said["laura", "laura_naive"]["detail"]
    quentin = said["quentin", "quentin_naive"]["detail"]
    assert "unwritten" in quentin and "groups of" in quentin  # the launch it was given


@pytest.mark.slow
def test_names_the_submissions_share_are_said_once_and_refuse_none(tmp_path):
    needs_backend("opencl")
    copied = ("carol", "dave", "sam")  # the example's manifest, copied three times
    folder = _class_of(tmp_path, copied)
    done = xbackend_here("check", str(folder), "--steps", "0", "--shapes", "7x13x5", "--no-times",
                         "--sanitize", "off", "--out", str(tmp_path / "g"), *SEED)  # fmt: skip
    assert done.stdout.count("family 'student' (carol, dave, sam)") == 1, done.stdout
    assert "already" not in done.stdout + done.stderr  # no name refused
    for name in copied:
        assert f"] {name} (" in done.stdout


@pytest.mark.slow
def test_a_check_killed_midway_keeps_the_submissions_it_finished(tmp_path):
    """The first submission graded, the second hanging: SIGTERM to the check. The
    gradebook holds the first; the hanging kernel's processes are gone with it."""
    needs_backend("opencl")
    folder = _class_of(tmp_path, ("alice", "grace"))
    out = tmp_path / "grades"
    path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]  # as run_xbackend's
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    command = [sys.executable, "-m", "xbackend", "check", str(folder), "--steps", "1",
               "--no-times", "--sanitize", "off", "--kernel-timeout", "300", "--out", str(out),
               *SEED]  # fmt: skip
    check = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)  # fmt: skip
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not (out / "submissions" / "grace").is_dir():
        time.sleep(0.5)
    time.sleep(3)  # grace's kernel is hanging by now
    check.send_signal(signal.SIGTERM)
    stdout, stderr = check.communicate(timeout=60)
    assert check.returncode != 0, stdout + stderr
    rows = list(csv.DictReader((out / "gradebook.csv").open()))
    assert {row["submission"] for row in rows} == {"alice"}, rows
    assert all(row["verdict"] in ("equal", "compiles") for row in rows), rows
    leftover = subprocess.run(["pgrep", "-f", str(folder / "grace")], capture_output=True,
                              text=True)  # fmt: skip
    assert leftover.stdout.strip() == "", leftover.stdout


@pytest.mark.slow
def test_a_submission_past_its_deadline_is_its_verdict_and_the_next_runs(tmp_path):
    needs_backend("opencl")
    folder = _class_of(tmp_path, ("grace", "kevin"))
    out = tmp_path / "grades"
    done = xbackend_here("check", str(folder), "--steps", "1", "--no-times", "--sanitize", "off",
                         "--kernel-timeout", "300", "--submission-timeout", "10", "--out",
                         str(out), *SEED)  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    rows = list(csv.DictReader((out / "gradebook.csv").open()))
    grace = [row for row in rows if row["submission"] == "grace"]
    assert any("past its 10 s" in row["detail"] for row in grace), grace
    assert any(r["submission"] == "kevin" and r["verdict"] == "equal" for r in rows), rows


def test_a_folder_with_kernels_and_no_manifest_is_a_submission_with_that_verdict(tmp_path):
    folder = tmp_path / "class"
    shutil.copytree(CLASS / "kevin", folder / "kevin")
    (folder / "lost").mkdir()
    (folder / "lost" / "mine.cl").write_text("__kernel void k(void) {}\n")
    (folder / "notes").mkdir()  # nothing to check: not a submission
    found = submissions.find([folder])
    assert [each.name for each in found] == ["kevin", "lost"]
    assert "no family.toml" in found[1].problem and "mine.cl" in found[1].problem


def test_two_classes_alices_are_named_by_their_class(tmp_path):
    for group in ("monday", "tuesday"):
        shutil.copytree(CLASS / "alice", tmp_path / group / "alice")
    found = submissions.find([tmp_path / "monday", tmp_path / "tuesday"])
    assert [each.name for each in found] == ["monday/alice", "tuesday/alice"]
    assert submissions.shared_names(found) == [
        "family 'alice' (monday/alice, tuesday/alice)",
        "variant 'alice_naive' (monday/alice, tuesday/alice)",
        "variant 'alice_tiled' (monday/alice, tuesday/alice)",
    ]


def test_records_written_as_they_come_are_read_back_even_cut_short(tmp_path):
    path = tmp_path / "records.jsonl"
    verdict = Verdict("opencl", "v", Shape(7, 13, 5), False, "largest error 3× its bound")
    timing = Timing("opencl", "v", Shape(16, 14, 16), 2e-6, 1.9e-6, 2.2e-6, "globaltimer", 10)
    with path.open("w") as stream:
        records.write(stream, verdict)
        records.write(stream, timing)
        stream.write('{"verdict": {"label": "opencl", "vari')  # a process killed mid-line
    found = records.read(path)
    assert found.verdicts == [verdict] and found.timings == [timing] and not found.done
    with path.open("a") as stream:
        stream.write("\n")
        records.write(stream, None)
    assert records.read(path).done


def _timing(variant: str, seconds: float) -> Timing:
    return Timing("opencl", variant, Shape(608, 532, 608), seconds, seconds * 0.98,
                  seconds * 1.03, "opencl-profiling", 10)  # fmt: skip


RACE = "Read-write data race (local): s.cl line 9"


def test_gradebook_rows_say_verdict_shapes_finding_and_speedups():
    shapes = [Shape(7, 13, 5), Shape(33, 20, 17), Shape(16, 14, 16)]
    found = Records(
        verdicts=[
            Verdict("oclgrind", "s_tiled", None, False, RACE),
            *(Verdict("opencl", "s_naive", shape, True, "") for shape in shapes),
            Verdict("opencl", "s_tiled", shapes[0], True, ""),
            Verdict("opencl", "s_tiled", shapes[1], False, "largest error 4× its bound"),
            Verdict("opencl", "s_tiled", shapes[2], True, ""),
        ],
        timings=[_timing("s_naive", 4e-3), _timing("s_tiled", 1e-3)],
        variants=[records.Described("s_naive", "s", "mm_naive", {"opencl": "s.cl"}, "float32"),
                  records.Described("s_tiled", "s", "mm_tiled", {"opencl": "s.cl"}, "float32")],
        done=True,
    )  # fmt: skip
    references = {"opencl tiled": _timing("tiled", 2e-3), "opencl vendor": _timing("vendor", 5e-4)}
    naive, tiled = gradebook.rows("sue", found, references, len(shapes))
    assert (naive.variant, naive.verdict, naive.shapes) == ("s_naive", "equal", "equal at all 3")
    assert (tiled.verdict, tiled.file, tiled.kernel) == ("WRONG", "s.cl", "mm_tiled")
    assert tiled.shapes == "WRONG at 1 of 3: 33×20·20×17"
    assert tiled.finding == f"oclgrind: {RACE}"
    assert tiled.speedups == pytest.approx({"own naive": 4.0, "xbackend tiled": 2.0, "vendor": 0.5})
    ranked = gradebook.ranked([naive, tiled])
    assert [row.rank for row in ranked] == [1, None]  # only the equal kernel is ranked
    text = gradebook.csv_text(ranked)
    assert text.splitlines()[0].split(",") == list(gradebook.COLUMNS)


def test_a_submissions_strings_are_escaped_on_the_pages():
    evil = "<script>alert(1)</script>"
    found = Records([Verdict("opencl", evil, Shape(1, 1, 1), False, evil)], [], [], True)
    rows = gradebook.rows(evil, found, {}, 1)
    page = pages.class_page(rows, [], [evil], {}, rank=True)
    mine = pages.submission_page(evil, evil, rows, found, 1, {})
    for text in (page, mine):
        assert "<script>" not in text and "&lt;script&gt;" in text
    assert "/" not in pages.page_name("a/b") and pages.page_name("a/b").endswith(".html")


def test_cudas_poison_is_a_nan_in_either_float_type():
    """The CUDA backend poisons an output 32 bits at a time (cuMemsetD32): its pattern must
    be a NaN as one float32 and, twice over, as one float64 (0x7FC00000 twice is a float64
    of 2.2e307: an unwritten float64 element read as a number, and a red zone as written)."""
    from xbackend.backends.cuda import _NAN_BITS_F32, _NAN_BITS_F64

    for pattern, dtype in ((_NAN_BITS_F32, np.float32), (_NAN_BITS_F64, np.float64)):
        words = np.full(2, pattern, dtype=np.uint32)
        assert np.isnan(words.view(dtype)).all(), (hex(pattern), dtype)
    assert not np.isnan(np.full(2, 0x7FC00000, dtype=np.uint32).view(np.float64)).any()
