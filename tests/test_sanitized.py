"""oclgrind's verdicts kept in a file (``grading/sanitized.py``, ``XBACKEND_SANITIZER_VERDICTS``).

A run whose key is in the file takes the recorded verdict without simulating; the key
covers exactly what oclgrind simulates, so an edited kernel, a header it includes, a
manifest's build, the operands, oclgrind's settings or another oclgrind never take a
verdict recorded for other code; a run that did not finish is never recorded. Two broken
kernels, a race and a write out of bounds, are simulated here every time: the proof that
oclgrind itself still catches them (tests/test_sanitizers.py does the same for the
shipped kernels' probe).
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest

from xbackend import families
from xbackend.grading import sanitized, sanitizers
from xbackend.grading.sanitizers import sanitize, verdict_key
from xbackend.pytest_plugin import needs_backend

ROOT = Path(__file__).resolve().parent.parent
STUDENT = ROOT / "examples" / "assignment" / "student"
SEED = 20261128
# A report no kernel of the student's makes: seen only where the file was read.
PLANTED = {"kernel": "matmul_naive", "what": "Invalid write of size 4 (global)", "line": 15,
           "code": "C[row * wB + col] = sum;", "reads_out_of_bounds": False,
           "writes_out_of_bounds": True}  # fmt: skip


@pytest.fixture
def verdicts(tmp_path, monkeypatch) -> Path:
    """A file of verdicts of the test's own, empty."""
    path: Path = tmp_path / "verdicts.jsonl"
    monkeypatch.setenv(sanitized.ENV, str(path))
    return path


def _student(tmp_path: Path, name: str = "student") -> Path:
    """The student's folder copied, its families this process's only user families."""
    folder = tmp_path / name
    shutil.copytree(STUDENT, folder)
    families.use_folders(())
    families.add_folders([str(folder)])
    return folder


def _no_simulation(monkeypatch) -> None:
    def simulated(*args, **kwargs):
        raise AssertionError("oclgrind ran although its verdict was in the file")

    monkeypatch.setattr(sanitizers, "_under", simulated)


def test_a_verdict_in_the_file_is_taken_without_simulating(
    verdicts, oclgrind, tmp_path, own_families, monkeypatch
):
    folder = _student(tmp_path)
    key = verdict_key("student_naive", oclgrind, SEED)
    assert key
    said = {"finding": PLANTED, "unfinished": "", "skipped": ""}
    sanitized.record(key, "student_naive, planted", said)
    _no_simulation(monkeypatch)
    done = sanitize([str(folder)], "student_naive", oclgrind, SEED)
    assert done.finding is not None and done.finding.what == PLANTED["what"]
    assert done.finding.out_of_bounds == "writes" and not done.runs_natively


def test_the_key_covers_what_oclgrind_simulates(verdicts, oclgrind, tmp_path, own_families,
                                                 monkeypatch):  # fmt: skip
    """Each thing that changes what oclgrind runs changes the key; the same kernel in
    another folder (a clean checkout, another student's copy) keeps it."""
    folder = _student(tmp_path / "a")
    kernel, manifest = folder / "student.cl", folder / "family.toml"
    (folder / "extra.h").write_text("#define EXTRA 1\n")
    kernel.write_text('#include "extra.h"\n' + kernel.read_text())
    keys = {"base": verdict_key("student_tiled", oclgrind, SEED)}
    assert keys["base"] == verdict_key("student_tiled", oclgrind, SEED)
    moved = _student(tmp_path / "b")
    shutil.copy(kernel, moved / "student.cl")
    shutil.copy(folder / "extra.h", moved / "extra.h")
    assert verdict_key("student_tiled", oclgrind, SEED) == keys["base"]
    families.use_folders(())
    families.add_folders([str(folder)])
    keys["seed"] = verdict_key("student_tiled", oclgrind, SEED + 1)
    (folder / "extra.h").write_text("#define EXTRA 2\n")
    keys["header"] = verdict_key("student_tiled", oclgrind, SEED)
    kernel.write_text("// a comment moves every line a report names\n" + kernel.read_text())
    keys["comment"] = verdict_key("student_tiled", oclgrind, SEED)
    monkeypatch.setenv("XBACKEND_INDEX", "wide")
    keys["wide"] = verdict_key("student_tiled", oclgrind, SEED)
    monkeypatch.setenv("OCLGRIND_QUICK", "1")
    keys["oclgrind's setting"] = verdict_key("student_tiled", oclgrind, SEED)
    monkeypatch.setattr(sanitized, "simulator_version", lambda tool: "Oclgrind 99.1")
    keys["oclgrind"] = verdict_key("student_tiled", oclgrind, SEED)
    manifest.write_text(manifest.read_text().replace("default_tile = 16", "default_tile = 8"))
    families.read_again()  # a manifest is read once a process: a check's is its own
    keys["tile"] = verdict_key("student_tiled", oclgrind, SEED)
    assert len(set(keys.values())) == len(keys), keys


@pytest.mark.slow
def test_an_edited_kernel_misses_the_file(verdicts, oclgrind, tmp_path, own_families):
    """A clean verdict recorded for the student's naive kernel; its guard then taken out:
    the edited kernel is simulated, and its write out of bounds found, never the file's
    clean verdict for the code before."""
    needs_backend("opencl")
    folder = _student(tmp_path)
    clean = verdict_key("student_naive", oclgrind, SEED)
    sanitized.record(clean, "student_naive, clean", {"finding": None, "unfinished": "",
                                                     "skipped": ""})  # fmt: skip
    kernel = folder / "student.cl"
    guard = "    if (row >= hA || col >= wB)\n        return;\n"
    assert guard in kernel.read_text()
    kernel.write_text(kernel.read_text().replace(guard, ""))
    edited = verdict_key("student_naive", oclgrind, SEED)
    assert edited and edited != clean
    done = sanitize([str(folder)], "student_naive", oclgrind, SEED)
    assert done.finding is not None and "Invalid write" in done.finding.what, done
    assert (sanitized.recorded(edited) or {})["finding"]["what"] == done.finding.what
    assert (sanitized.recorded(clean) or {"finding": 0})["finding"] is None  # the old code's


@pytest.mark.slow
@pytest.mark.parametrize(
    ("folder", "variant", "report"),
    [("verdicts/no_first_barrier", "racy_tiled", "data race"),
     ("unguarded_family", "unguarded_naive", "Invalid write")],
)  # fmt: skip
def test_oclgrind_itself_catches_a_race_and_a_write_out_of_bounds(
    folder, variant, report, oclgrind, own_families, monkeypatch
):
    """Never from the file: ``none`` ignores it, and nothing is read or written."""
    needs_backend("opencl")
    monkeypatch.setenv(sanitized.ENV, "none")
    monkeypatch.setattr(sanitized, "recorded", lambda key: pytest.fail("the file was read"))
    kernels = ROOT / "tests" / "kernels" / folder
    families.add_folders([str(kernels)])
    assert verdict_key(variant, oclgrind, SEED) == ""
    done = sanitize([str(kernels)], variant, oclgrind, SEED)
    assert done.finding is not None and report in done.finding.what, done


def test_a_run_that_did_not_finish_is_not_recorded(verdicts, tmp_path, own_families):
    """A stand-in for oclgrind that says its version, then dies of a signal: unfinished,
    and simulated again next time (a crash or a deadline is the machine's)."""
    folder = _student(tmp_path)
    tool = tmp_path / "oclgrind"
    tool.write_text('#!/bin/sh\n[ "$1" = --version ] && { echo "Oclgrind 21.10"; exit 0; }\n'
                    "kill -SEGV $$\n")  # fmt: skip
    tool.chmod(0o755)
    assert verdict_key("student_naive", str(tool), SEED)
    done = sanitize([str(folder)], "student_naive", str(tool), SEED)
    assert done.unfinished and not done.runs_natively
    assert not verdicts.exists() or verdicts.read_text() == ""


def test_no_file_unless_one_is_named(tmp_path, own_families, monkeypatch):
    """Unset, empty or ``none``: no key is made, nothing is read or written."""
    _student(tmp_path)
    for value in ("", "none", "NONE"):
        monkeypatch.setenv(sanitized.ENV, value)
        assert sanitized.verdicts_path() is None
        assert verdict_key("student_naive", "oclgrind", SEED) == ""
        sanitized.record("k", "nothing", {"finding": None})
    monkeypatch.delenv(sanitized.ENV)
    assert sanitized.verdicts_path() is None
    assert list(tmp_path.iterdir()) == [tmp_path / "student"]


def test_a_file_that_cannot_be_read_or_a_line_cut_short_is_a_miss(verdicts, tmp_path, monkeypatch):
    """A line cut short (a machine's crash mid-write) or edited by hand is no verdict; a
    later entry of a key wins; a folder where the file should be is said, once."""
    sanitized.record("kept", "a verdict", {"finding": None, "unfinished": "", "skipped": ""})
    with verdicts.open("a") as stream:
        stream.write('{"key": "cut", "verdict": {"fin\nnot json\n[1, 2]\n')
    assert sanitized.recorded("kept") == {"finding": None, "unfinished": "", "skipped": ""}
    assert sanitized.recorded("cut") is None and sanitized.recorded("absent") is None
    sanitized.record("kept", "again", {"finding": None, "unfinished": "", "skipped": "why"})
    assert (sanitized.recorded("kept") or {})["skipped"] == "why"
    assert json.loads(verdicts.read_text().splitlines()[0])["what"] == "a verdict"
    folder = tmp_path / "a folder"
    folder.mkdir()
    monkeypatch.setenv(sanitized.ENV, str(folder))
    sanitized._warn.cache_clear()
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        assert sanitized.recorded("kept") is None
    assert any(sanitized.ENV in str(w.message) and "not read" in str(w.message) for w in said)
