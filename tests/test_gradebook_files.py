"""Issues 52 and 54: the gradebook's files say the same word for the same kernel, are never
written over another check's, name every submission apart, never write through a link,
keep each log bounded, and hold no cell a spreadsheet would run.
"""

from __future__ import annotations

import csv
import dataclasses
import html
import itertools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, kernel_line, run_xbackend, xbackend_here

from xbackend.cli.check_submission import summary_of
from xbackend.grading import classroom, compilers, gradebook, pages, records, submissions
from xbackend.grading.records import Records, Timing, Verdict
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
    done = xbackend_here("check", str(folder), *options, "--out", str(tmp_path / "g"))
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
    from xbackend.backends.cuda import CudaBackend

    if compilers.nvcc() and not CudaBackend.available()[0]:  # nvcc builds; nothing runs it
        assert any(row["verdict"] == "compiles" for row in book), book
    for path in (tmp_path / "g").rglob("*"):
        if path.is_file():
            assert "passes" not in path.read_text(errors="replace"), path


# -- 52.2: nothing overwritten; --merge replaces a resubmission's own rows only ---------------


def _class(tmp_path: Path, names: tuple[str, ...]) -> Path:
    folder = tmp_path / "class"
    for name in names:
        shutil.copytree(CLASS / name, folder / name)
    return folder


def _files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def _rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(path.open()))


@pytest.mark.slow
def test_a_resubmission_into_a_used_gradebook_is_refused_or_merged_losing_no_row(tmp_path):
    needs_backend("opencl")
    folder = _class(tmp_path, ("alice", "kevin", "oscar"))
    out = tmp_path / "grades"
    done = xbackend_here("check", str(folder), *QUICK, "--out", str(out))
    assert done.returncode in (0, 1), done.stdout + done.stderr
    before = _files(out)
    book, every = _rows(out / "gradebook.csv"), _rows(out / "check.csv")
    assert {row["submission"] for row in book} == {"alice", "kevin", "oscar"}
    # Without the flag: one line, exit 2, before anything runs; nothing changed.
    again = xbackend_here("check", str(folder / "kevin"), *QUICK, "--out", str(out))
    assert again.returncode == 2, again.stdout + again.stderr
    assert again.stderr.splitlines() == [
        f"xbackend: error: --out {out}: holds the gradebook of another check "
        "(gradebook.csv); check into a new folder, or add --merge to replace only these "
        "submissions' rows, pages and records in it"
    ]
    assert "checking" not in again.stdout and _files(out) == before
    # With it: kevin's rows replaced, every other row, page and record kept as it was.
    merged = xbackend_here("check", str(folder / "kevin"), *QUICK, "--out", str(out), "--merge")
    assert merged.returncode == 0, merged.stdout + merged.stderr
    after = _files(out)
    for name, data in before.items():
        if "kevin" not in name and not name.startswith(("gradebook", "check.csv")):
            assert after[name] == data, name
    assert [r for r in _rows(out / "gradebook.csv") if r["submission"] != "kevin"] == [
        r for r in book if r["submission"] != "kevin"
    ]
    assert [r for r in _rows(out / "check.csv") if r["submission"] != "kevin"] == [
        r for r in every if r["submission"] != "kevin"
    ]
    kevin = [r for r in _rows(out / "gradebook.csv") if r["submission"] == "kevin"]
    assert [r["variant"] for r in kevin] == ["kevin_naive", "kevin_tiled"]
    for name, before_rows in (("gradebook.csv", book), ("check.csv", every)):
        order = list(dict.fromkeys(r["submission"] for r in _rows(out / name)))
        assert order == list(dict.fromkeys(r["submission"] for r in before_rows)), name
        # in the class's order, kevin where he was
    page = (out / "gradebook.html").read_text()
    assert all(f"submissions/{name}.html" in page for name in ("alice", "kevin", "oscar"))
    assert "kevin re-checked" in page


def test_a_gradebooks_rows_read_back_are_the_rows_written():
    rng = np.random.default_rng(5202)
    found = _records(rng)
    shape = _shapes(rng, 1)[0]
    median = float(rng.uniform(1e-4, 1e-2))
    timed = Timing("opencl", "s_naive", shape, median, median * 0.97, median * 1.05, "api", 9)
    found = Records(found.verdicts, [timed], found.variants, True)
    written = gradebook.ranked(gradebook.rows("=sue", found, {}, 3))
    again = gradebook.ranked(gradebook.read_rows(gradebook.csv_text(written)))
    assert gradebook.csv_text(again) == gradebook.csv_text(written)
    assert again[1].timing is not None and again[1].timing.low_s == pytest.approx(median * 0.97)


# -- 54.1, 54.2: every submission its own rows, page and records ------------------------------


def test_names_that_differ_only_where_sanitised_get_pages_of_their_own():
    pairs = [("zoë", "zoé"), ("anna smith", "anna_smith"), ("a/b", "a_b"), ("x.y", "x?y")]
    for first, second in pairs:
        assert pages.page_name(first) != pages.page_name(second), (first, second)
    for name in (n for pair in pairs for n in pair):
        page = pages.page_name(name)
        assert "/" not in page and not page.startswith(".") and page.endswith(".html")
    assert pages.page_name("alice") == "alice.html"  # a plain name is left as it is
    # A folder named as another's page: its records' folder would be alice's page.
    for page_like in ("alice.html", "Bob.HTML"):
        assert pages.page_name(page_like)[:-5] != pages.page_name(page_like.split(".")[0])
        assert not pages.page_name(page_like)[:-5].lower().endswith(".html")


def test_two_classes_folders_of_one_name_are_named_by_as_many_parents_as_tell_them_apart(
    tmp_path,
):
    for year in ("2024", "2025"):
        shutil.copytree(CLASS / "alice", tmp_path / year / "cls" / "alice")
    found = submissions.find([tmp_path / "2024" / "cls", tmp_path / "2025" / "cls"])
    assert [each.name for each in found] == ["2024/cls/alice", "2025/cls/alice"]


@pytest.mark.slow
def test_two_students_one_sanitised_name_and_two_classes_one_name_never_merge(tmp_path):
    """An equal kernel's student and a wrong one's, under names alike once sanitised or
    in two classes of one name: each has its own rows, page and records."""
    needs_backend("opencl")
    for year, source in (("2024", "kevin"), ("2025", "laura")):
        for name in (("zoë", "anna smith", "alice") if year == "2024"
                     else ("zoé", "anna_smith", "alice")):  # fmt: skip
            shutil.copytree(CLASS / source, tmp_path / year / "cls" / name)
    out = tmp_path / "g"
    done = xbackend_here("check", str(tmp_path / "2024" / "cls"), str(tmp_path / "2025" / "cls"),
                         *QUICK, "--out", str(out))  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    book = _rows(out / "gradebook.csv")
    names = ["2024/cls/alice", "anna smith", "zoë", "2025/cls/alice", "anna_smith", "zoé"]
    assert list(dict.fromkeys(r["submission"] for r in book)) == names
    for name in names:
        mine = {r["verdict"] for r in book if r["submission"] == name}
        assert mine == ({"equal"} if name in names[:3] else {"WRONG"}), (name, mine)
        page = (out / "submissions" / pages.page_name(name)).read_text()
        assert ("laura_naive" in page) == (name in names[3:]), name
        assert (out / "submissions" / pages.page_name(name)[:-5] / "records.jsonl").is_file()
    assert len({pages.page_name(name) for name in names}) == len(names)
    assert "6 submissions" in done.stdout and "3 of 6 submissions equal" in done.stdout


# -- 54.9: never write through a link inside --out --------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "planted", ["kevin/check.log", "kevin/records.jsonl", "kevin.html", "kevin"]
)
def test_a_link_inside_out_is_refused_before_anything_runs(planted, tmp_path):
    folder = _class(tmp_path, ("alice", "kevin"))
    out, elsewhere = tmp_path / "grades", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("keep me\n")
    link = out / "submissions" / planted
    link.parent.mkdir(parents=True)
    link.symlink_to(elsewhere if planted == "kevin" else elsewhere / "keep.txt")
    done = xbackend_here("check", str(folder), *QUICK, "--out", str(out))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        f"xbackend: error: {link} is a symbolic link; xbackend does not write through links"
    ]
    assert "checking" not in done.stdout
    assert sorted(p.name for p in elsewhere.iterdir()) == ["keep.txt"]
    assert (elsewhere / "keep.txt").read_text() == "keep me\n"


@pytest.mark.slow
def test_a_hard_link_at_a_submissions_log_is_never_written_through(tmp_path):
    """A hard link at ``--out/submissions/alice/check.log`` to a file outside: the log
    is made anew beside it, the file outside is left as it was (a truncation of the log
    in place emptied it: round 5's second look)."""
    folder = _class(tmp_path, ("alice", "kevin"))
    out, outside = tmp_path / "grades", tmp_path / "precious.txt"
    rng = np.random.default_rng(5409)
    kept = f"precious, outside --out: {rng.integers(1 << 30)}\n"
    outside.write_text(kept)
    log = out / "submissions" / "alice" / "check.log"
    log.parent.mkdir(parents=True)
    os.link(outside, log)
    done = xbackend_here("check", str(folder), *QUICK, "--out", str(out))
    assert done.returncode in (0, 1), done.stdout + done.stderr
    assert outside.read_text() == kept
    assert log.is_file() and log.stat().st_ino != outside.stat().st_ino


# -- 54.11: a submission's log is bounded -----------------------------------------------------


@pytest.mark.slow
def test_a_kernel_that_prints_a_line_a_work_item_gets_a_log_cut_to_its_bound(tmp_path, monkeypatch):
    """tests/kernels/chatty prints a line for every element of C: at 64×64·64×64, 4096 lines
    (160 KB). The log keeps its first and last bytes and says what it left out between."""
    needs_backend("opencl")
    monkeypatch.setattr(classroom, "LOG_HEAD_BYTES", 16 << 10)
    monkeypatch.setattr(classroom, "LOG_TAIL_BYTES", 4 << 10)
    folder = tmp_path / "chatty"
    shutil.copytree(ROOT / "tests" / "kernels" / "chatty", folder)
    options = [*QUICK[:4], "--shapes", "64x64x64", *QUICK[6:]]
    checked = classroom.check(submissions.Submission("chatty", folder), options,
                              tmp_path / "records", 300, quiet=True)  # fmt: skip
    assert [v.word for v in checked.records.verdicts] == ["equal"], checked.records.verdicts
    log = (tmp_path / "records" / "check.log").read_bytes()
    cut = re.search(rb"\n\[xbackend: (\d+) bytes of this check's output left out here: "
                    rb"its log keeps its first 16 KiB and its last 4 KiB\]\n", log)  # fmt: skip
    assert cut is not None, log[16 << 10 : (16 << 10) + 300]
    assert len(log) == (16 << 10) + (4 << 10) + len(cut.group(0))
    assert int(cut.group(1)) > 100_000  # what the kernel printed, less what was kept
    assert log.startswith(b"checking chatty_naive")
    assert log.rstrip().endswith(b"opencl chatty_naive: equal at all 1 shapes")
    # A check cut short reads its last words from the log's end only.
    words = classroom._last_lines(tmp_path / "records" / "check.log")
    assert words.endswith("opencl chatty_naive: equal at all 1 shapes")


# -- 54.12: no cell a spreadsheet runs --------------------------------------------------------

FORMULAS = ('=HYPERLINK("http://example.com/x","grades")', "+cmd|' /C calc'!A0", "@SUM(1+1)",
            "-2+3", "\t=1+1", "\r=1+1", "'=already quoted")  # fmt: skip


def test_a_cell_beginning_as_a_formula_is_quoted_in_both_csvs_and_read_back_as_it_was():
    rng = np.random.default_rng(5412)
    found = _records(rng)
    for name in FORMULAS:
        found.verdicts.append(Verdict("opencl", "s_tiled", _shapes(rng, 1)[0], False, name))
    rows = gradebook.rows("x", found, {}, 3)
    rows = [
        dataclasses.replace(row, submission=name)
        for row, name in zip(rows, FORMULAS[:4], strict=True)
    ]
    texts = (gradebook.csv_text(rows), gradebook.verdicts_csv([(n, found) for n in FORMULAS]))
    for text in texts:
        cells = [cell for line in csv.reader(text.splitlines(keepends=True)) for cell in line]
        risky = [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r") and c != "-"]
        assert not risky, risky
    written = list(csv.DictReader(texts[0].splitlines(keepends=True)))
    assert [row["submission"] for row in written] == ["'" + name for name in FORMULAS[:4]]
    assert [row.submission for row in gradebook.read_rows(texts[0])] == list(FORMULAS[:4])
    lines = gradebook.read_verdicts(texts[1])
    assert {line[0] for line in lines} == set(FORMULAS)
    assert gradebook.verdicts_csv([], lines) == texts[1]  # kept lines written as they were


# -- 54.17, 54.21, 54.22: odd folder names, links and hidden folders in a class --------------


def _odd_class(tmp_path: Path) -> Path:
    """A class of kevin's kernels under odd names: not UTF-8 (a zip made on Windows), a
    terminal escape, a formula; a link to another's folder, a link out of the class, a
    hidden folder and one starting with _."""
    folder = tmp_path / "class"
    folder.mkdir()
    outside = tmp_path / "elsewhere" / "olga"
    shutil.copytree(CLASS / "kevin", outside)
    for raw in (b"caf\xe9", b"esc\x1b[2Jname", b"=HYPERLINK(1)", b"kevin", b".hidden", b"_old"):
        shutil.copytree(CLASS / "kevin", folder / os.fsdecode(raw))
    (folder / "zz_copy_of_kevin").symlink_to(folder / "kevin")
    (folder / "olga").symlink_to(outside)
    return folder


def test_links_and_hidden_folders_in_a_class_are_said_never_skipped_unseen(tmp_path):
    folder = _odd_class(tmp_path)
    found, said = submissions.gather([folder])
    names = [each.name for each in found]
    assert names == ["=HYPERLINK(1)", "caf\\xe9", "esc\\x1b[2Jname", "kevin", "olga"]
    assert found[-1].folder == (tmp_path / "elsewhere" / "olga").resolve()
    assert said == [
        "skipped .hidden and _old: folders whose names start with '.' or '_' are not submissions",
        f"olga is a link to {(tmp_path / 'elsewhere' / 'olga').resolve()}: checked there",
        "skipped zz_copy_of_kevin: a link to kevin's folder, checked once as kevin",
    ]
    for name in names:
        assert name.isprintable(), name
        name.encode("utf-8")  # every name written to a file as it is shown


def test_links_to_nothing_in_a_class_are_said_too(tmp_path):
    """A dangling link and a link to itself in a class (round 5's second look: neither
    was named anywhere, against "what is not checked is said")."""
    folder = tmp_path / "class"
    shutil.copytree(CLASS / "alice", folder / "alice")
    (folder / "dave").symlink_to(tmp_path / "gone")
    (folder / "loop").symlink_to(folder / "loop")
    found, said = submissions.gather([folder])
    assert [each.name for each in found] == ["alice"]
    assert said == [
        "skipped dave and loop: links to nothing (their target is gone, or they lead to themselves)"
    ]


@pytest.mark.slow
def test_a_folders_control_characters_never_reach_the_terminal_in_an_error(tmp_path):
    """One folder checked by itself, whose manifest is refused: the error's line names the
    folder escaped, as a class's lines do (its ESC cleared the teacher's screen)."""
    folder = tmp_path / "esc\x1b[2Jdir"
    shutil.copytree(CLASS / "alice", folder)
    with (folder / "family.toml").open("a") as manifest:
        manifest.write("junk = [\n")
    done = xbackend_here("check", str(folder), *QUICK)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "\x1b" not in done.stderr
    assert f"xbackend: error: {tmp_path}/esc\\x1b[2Jdir/family.toml: " in done.stderr


@pytest.mark.slow
def test_a_class_with_odd_folder_names_is_checked_whole_and_shown_escaped(tmp_path):
    needs_backend("opencl")
    folder = _odd_class(tmp_path)
    out = tmp_path / "g"
    done = xbackend_here("check", str(folder), *QUICK, "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "\x1b" not in done.stdout + done.stderr
    assert "[2/5] caf\\xe9 (" in done.stdout and "[3/5] esc\\x1b[2Jname (" in done.stdout
    assert "skipped zz_copy_of_kevin: a link to kevin's folder, checked once as kevin" in (
        done.stdout
    )
    book = _rows(out / "gradebook.csv")
    assert list(dict.fromkeys(r["submission"] for r in book)) == [
        "'=HYPERLINK(1)", "caf\\xe9", "esc\\x1b[2Jname", "kevin", "olga"
    ]  # fmt: skip
    assert {r["verdict"] for r in book} == {"equal"}
    page = (out / "gradebook.html").read_text()
    assert "\x1b" not in page and "skipped .hidden and _old" in page


# -- 52.8: ranks a teacher can defend; the host and the times said; a page a student keeps ---


def _timed(rng: np.random.Generator, variant: str, low: float, high: float) -> Timing:
    median = float(rng.uniform(low, high))
    return Timing("opencl", variant, Shape(608, 532, 608), median, low, high, "api", 10)


def test_kernels_whose_intervals_overlap_share_a_rank():
    """Ranks as a teacher can defend them: one more than the kernels surely faster (whose
    interval lies wholly below); a rank shared is written 3=."""
    rng = np.random.default_rng(5281)
    bounds = {"a": (1.0, 1.2), "b": (1.1, 1.4), "c": (2.0, 2.1), "d": (2.05, 2.3),
              "e": (2.08, 2.4), "f": (5.0, 5.5)}  # fmt: skip
    scale = float(rng.uniform(1e-4, 1e-2))
    made = []
    for name, (low, high) in bounds.items():
        found = Records([Verdict("opencl", f"{name}_v", Shape(7, 13, 5), True, "")],
                        [_timed(rng, f"{name}_v", low * scale, high * scale)],
                        [records.Described(f"{name}_v", name, "k", {"opencl": "k.cl"},
                                           "float32")], True)  # fmt: skip
        made += gradebook.rows(name, found, {}, 1)
    ranked = gradebook.ranked(made)
    said = {row.submission: gradebook.rank_said(row) for row in ranked}
    assert said == {"a": "1=", "b": "1=", "c": "3=", "d": "3=", "e": "3=", "f": "6"}
    rows = list(csv.DictReader(gradebook.csv_text(ranked).splitlines()))
    assert [row["rank"] for row in rows] == ["1=", "1=", "3=", "3=", "3=", "6"]
    listed = sorted(ranked, key=pages.rank_order)  # a shared rank by median time
    assert [row.rank for row in listed] == [1, 1, 3, 3, 3, 6]
    for first, second in itertools.pairwise(listed):
        if first.rank == second.rank:
            assert first.timing and second.timing
            assert first.timing.median_s <= second.timing.median_s
    page = pages.class_page(ranked, [], [], {}, rank=True)
    assert "<td>3=</td>" in page or ">3=<" in page
    assert (
        "Kernels whose 95% intervals overlap share a rank (3=): a kernel's rank is one more "
        "than the number of kernels surely faster, whose interval lies wholly below its own."
    ) in html.unescape(page)


def test_a_students_page_holds_no_machine_path_and_no_row_of_dashes(tmp_path):
    folder = tmp_path / "teacher" / "class" / "sue"
    problem = f"no family.toml beside its kernels (sue.cl): {folder}/sue.cl"
    found = Records([Verdict("-", "-", None, None, problem)], [], [], True)
    rows = gradebook.rows("sue", found, {}, 1)
    mine = pages.submission_page("sue", str(folder), rows, found, 1, {})
    assert str(tmp_path) not in mine and "sue/sue.cl" in mine
    assert "1 shape a kernel" in mine and "1 shapes" not in mine
    page = pages.class_page(rows, [], [], {}, rank=False)
    assert "- -:" not in page and ">no family.toml beside its kernels" in page


def test_the_gradebook_says_when_the_host_was_busy_and_how_the_times_were_taken():
    said = gradebook.host_sentence([("alice", 0.1), ("bob", 1.37), ("carol", None), ("dan", 0.6)])
    assert said == (
        "the host was busy: other processes took half a core or more while 2 of 3 "
        "submissions were checked (bob, dan; up to 1.4 cores): their times read slower than "
        "on a quiet machine"
    )
    beside = gradebook.host_sentence([("bob", 1.37)], jobs=4)
    assert beside is not None and beside.endswith(
        "(bob; up to 1.4 cores; with --jobs 4, the submissions checked beside each among "
        "them): their times read slower than on a quiet machine"
    )
    assert gradebook.host_sentence([("alice", 0.1), ("carol", None)]) is None
    assert gradebook.times_sentence(Shape(608, 532, 608), 1) == (
        "times: each equal kernel's median over at most 10 timed runs at 608×532·532×608, "
        "with the 95% interval of that median, on the clock its row names; one submission "
        "at a time, each in a process of its own"
    )


@pytest.mark.slow
def test_a_check_on_a_busy_host_says_so_and_how_its_times_were_taken(tmp_path):
    """A process spinning on a core beside the check: the gradebook and the terminal say
    the host was busy, and the page says how the times were taken."""
    needs_backend("opencl")
    folder = _class(tmp_path, ("kevin",))
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        done = run_xbackend("check", str(folder / "kevin"), "--backends", "opencl", "--steps",
                            "1", "--sanitize", "off", "--out", str(tmp_path / "g"))  # fmt: skip
    finally:
        spinner.kill()
        spinner.wait()
    assert done.returncode == 0, done.stdout + done.stderr
    busy = re.search(
        r"the host was busy: other processes took half a core or more while 1 of 1 "
        r"submissions were checked \(kevin; up to [0-9.]+ cores\): their times read slower "
        r"than on a quiet machine", done.stdout,
    )  # fmt: skip
    assert busy is not None, done.stdout
    page = html.unescape((tmp_path / "g" / "gradebook.html").read_text())
    assert busy.group(0) in page
    assert (
        "times: each equal kernel's median over at most 10 timed runs at 16×14·14×16, with "
        "the 95% interval of that median, on the clock its row names; one submission at a "
        "time, each in a process of its own"
    ) in page


@pytest.mark.slow
def test_a_kernels_folder_not_named_in_utf8_is_refused_by_name(tmp_path):
    """``compare --kernels caf\\xe9`` (a zip made on Windows): its path went to the compiler
    and every point read "UnicodeEncodeError ... (at __init__.py:338)"."""
    folder = os.fsencode(tmp_path) + b"/caf\xe9"
    shutil.copytree(CLASS / "alice", os.fsdecode(folder))
    done = xbackend_here("compare", "--kernels", os.fsdecode(folder), "--backends", "opencl",
                         "--sizes", "9x9x9", "--out", str(tmp_path / "o"))  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(f"xbackend: error: --kernels {tmp_path}/caf\\xe9: its path is ")
    assert "UnicodeEncodeError" not in done.stdout + done.stderr
