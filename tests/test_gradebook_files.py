"""Issues 52 and 54: the gradebook's files say the same word for the same kernel, are never
written over another check's, name every submission apart, never write through a link,
keep each log bounded, and hold no cell a spreadsheet would run.
"""

from __future__ import annotations

import csv
import shutil

import numpy as np
import pytest
from conftest import ROOT, kernel_line, run_xbackend

from xbackend.cli.check_submission import summary_of
from xbackend.grading import compilers, gradebook, pages, records
from xbackend.grading.records import Records, Verdict
from xbackend.operations import Shape
from xbackend.pytest_plugin import needs_backend

CLASS = ROOT / "examples" / "class"
QUICK = ("--backends", "opencl", "--steps", "0", "--shapes", "7x13x5", "--no-times",
         "--sanitize", "off", "--seed", "20261128")  # fmt: skip
NVCC = "compiled by nvcc for sm_90; no CUDA device here to run it"


def _vocabulary_in_docs() -> dict[str, str]:
    """The verdict words docs/grading.md lists, with what each means."""
    text = (ROOT / "docs" / "grading.md").read_text()
    table = text.split("**The verdict words**", 1)[1].split("\n\n", 2)[1]
    found = {}
    for line in table.splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        found[cells[0].strip("`")] = cells[1]
    return found


def _shapes(rng: np.random.Generator, count: int) -> list[Shape]:
    return [Shape(*(int(v) for v in rng.integers(1, 200, 3))) for _ in range(count)]


def _records(rng: np.random.Generator) -> Records:
    """A submission of three kernels: one nvcc only built, one equal, one wrong."""
    shapes = _shapes(rng, 3)
    return Records(
        verdicts=[
            Verdict("nvcc", "s_naive", None, True, NVCC),
            *(Verdict("opencl", "s_naive", shape, True, "") for shape in shapes),
            Verdict("nvcc", "s_tiled", None, True, NVCC),
            Verdict("opencl", "s_tiled", shapes[0], True, ""),
            Verdict("opencl", "s_tiled", shapes[1], False, "largest error 4× its bound"),
        ],
        timings=[],
        variants=[records.Described("s_naive", "s", "mm", {"cuda": "s.cu", "opencl": "s.cl"},
                                    "float32"),
                  records.Described("s_tiled", "s", "mm2", {"cuda": "s.cu", "opencl": "s.cl"},
                                    "float32")],
        done=True,
    )  # fmt: skip


# -- 52.1: one vocabulary in every file -------------------------------------------------------


def test_the_verdict_words_are_listed_once_in_the_docs_as_the_code_has_them():
    assert _vocabulary_in_docs() == records.WORDS


def test_a_kernel_nvcc_only_built_says_compiles_in_every_file_and_never_passes():
    rng = np.random.default_rng(5201)
    found = _records(rng)
    rows = gradebook.rows("sue", found, {}, 3)
    book = list(csv.DictReader(gradebook.csv_text(rows).splitlines()))
    every = list(csv.DictReader(gradebook.verdicts_csv([("sue", found)]).splitlines()))
    words = set(records.WORDS)
    assert {row["verdict"] for row in book} <= words
    assert {row["verdict"] for row in every} <= words
    # The same kernel, the same word: check.csv's nvcc line is the gradebook's cuda row.
    cuda = {row["variant"]: row["verdict"] for row in book if row["backend"] == "cuda"}
    nvcc = {row["variant"]: row["verdict"] for row in every if row["backend"] == "nvcc"}
    assert cuda == nvcc == {"s_naive": "compiles", "s_tiled": "compiles"}
    page = pages.class_page(rows, [], [], {}, rank=False)
    mine = pages.submission_page("sue", "sue", rows, found, 3, {})
    for text in (page, mine, gradebook.csv_text(rows), gradebook.verdicts_csv([("sue", found)])):
        assert "passes" not in text
    assert ">compiles<" in page
    # The terminal's words on the kernel: its word first, then nvcc's.
    said = summary_of([v for v in found.verdicts if v.label == "nvcc"][:1], 3)
    assert said == f"compiles ({NVCC})"
    assert not gradebook.passed(["compiles"]) and not gradebook.passed(["compiles", "compiles"])


@pytest.mark.slow
def test_every_file_a_check_writes_says_the_words_of_the_docs(tmp_path):
    """A class checked for real: every verdict cell of check.csv and gradebook.csv, and
    every kernel's word on the terminal, is one of the listed words, the same for one
    kernel in each (nvcc's included, where it is installed)."""
    needs_backend("opencl")
    folder = tmp_path / "class"
    for name in ("alice", "frank"):
        shutil.copytree(CLASS / name, folder / name)
    options = [o for o in QUICK if o not in ("--backends", "opencl")]
    done = run_xbackend("check", str(folder), *options, "--out", str(tmp_path / "g"))
    assert done.returncode == 1, done.stdout + done.stderr
    book = list(csv.DictReader((tmp_path / "g" / "gradebook.csv").open()))
    every = list(csv.DictReader((tmp_path / "g" / "check.csv").open()))
    words = set(records.WORDS)
    assert {row["verdict"] for row in book} <= words and {r["verdict"] for r in every} <= words
    for row in book:
        mine = [r["verdict"] for r in every
                if (r["submission"], records.language_of(r["backend"]), r["variant"])
                == (row["submission"], row["backend"], row["variant"])]  # fmt: skip
        if row["verdict"] == "compiles":
            assert mine == ["compiles"], (row, mine)
        line = kernel_line(done.stdout, row["variant"])
        assert f"{row['backend']}: {row['verdict']}" in line, (row, line)
    if compilers.nvcc():
        assert any(row["verdict"] == "compiles" for row in book), book
    for path in (tmp_path / "g").rglob("*"):
        if path.is_file():
            assert "passes" not in path.read_text(errors="replace"), path
