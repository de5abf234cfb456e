"""The report and the figures on hostile results: names, links, markup, mathtext, odd values.

A results folder can come from anywhere (another machine, a mail, an archive): whatever
its strings hold, ``report`` and ``plot`` write only inside their folder, never through a
symbolic link, show those strings as text in the Markdown, the page and the figures, and
do not stop with a traceback on values the loader lets through.

Every point here is well typed (what ``results.load`` validates); only its content is hostile.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import matplotlib
import pytest

from xbackend.figures import plots
from xbackend.report import page as report
from xbackend.report.page import FIGURES_DIR, write_report
from xbackend.results import PointRecord, load
from xbackend.safeio import UnsafePath

# One worker runs this file's tests (pytest-xdist): its module fixture
# (hostile_report) is made once.
pytestmark = pytest.mark.xdist_group("test_report_safety")


def _stats(seconds: float) -> dict[str, float]:
    return {
        "n": 3,
        "median": seconds,
        "q1": seconds * 0.9,
        "q3": seconds * 1.1,
        "min": seconds * 0.8,
        "max": seconds * 1.2,
        "mean": seconds,
    }


def _point(
    run_id: str,
    *,
    label: str = "cuda",
    device: str = "Test GPU",
    variant: str = "naive",
    tile: int | None = 16,
    dtype: str = "float32",
    op: str = "mm",
    batch: int = 1,
    shape: tuple[int, int, int] = (64, 64, 64),
    status: str = "ok",
    reason: str = "",
    seconds: float = 1e-3,
) -> dict[str, Any]:
    M, K, N = shape
    measured = status in ("ok", "mismatch")
    return {
        "type": "point",
        "run_id": run_id,
        "backend": "cuda",
        "label": label,
        "device": device,
        "variant": variant,
        "tile": tile,
        "dtype": dtype,
        "op": op,
        "batch": batch,
        "M": M,
        "K": K,
        "N": N,
        "flops": 2 * M * K * N * batch,
        "status": status,
        "reason": reason,
        "equal": {"ok": True, "mismatch": False}.get(status),
        "max_abs_error": 1e-6 if measured else None,
        "bound_ratio": 0.01 if measured else None,
        "kernel_s": _stats(seconds) if measured else None,
        "end_to_end_s": _stats(3 * seconds) if measured else None,
        "kernel_samples_s": [seconds] * 3 if measured else [],
        "end_to_end_samples_s": [3 * seconds] * 3 if measured else [],
        "gflops": (2 * M * K * N * batch / seconds / 1e9 if seconds else 0.0) if measured else None,
        "timestamp": "2026-11-22T01:00:00+00:00",
    }


def _run(run_id: str, *, host: str = "testhost", **plan: Any) -> dict[str, Any]:
    return {
        "type": "run",
        "run_id": run_id,
        "timestamp": "2026-11-22T01:00:00+00:00",
        "environment": {"host": host, "os": "Linux", "packages": {"numpy": "2.0"}},
        "plan": {"seed": 0, **plan},
        "devices": {"cuda": {"name": "Test GPU", "platform": "CUDA"}},
    }


def _write(folder: Path, lines: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True)
    (folder / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return folder


def _files(root: Path) -> set[Path]:
    return {path for path in root.rglob("*") if path.is_file() or path.is_symlink()}


# ---------------------------------------------------------------------------
# 1. File names never come from the data.

TRAVERSAL = "x/../../../../../../elsewhere/PWNED"
NOT_SQUARE = (100, 60, 30)  # no experiment's sizes: "other"


@pytest.mark.slow
def test_names_from_the_results_stay_in_the_report_folder(tmp_path):
    root = tmp_path / "a" / "b" / "c" / "d"
    results = _write(
        root / "results",
        [
            _run("chapter", preset="chapter"),
            _run("blog", preset="blog"),
            _run("other"),
            *(_point("chapter", op="rmm", dtype=TRAVERSAL, shape=(n, n, n)) for n in (64, 128)),
            _point("blog", op=TRAVERSAL),
            _point("blog", dtype=TRAVERSAL),
            _point("other", dtype=TRAVERSAL, shape=NOT_SQUARE),
            _point("other", shape=NOT_SQUARE),
        ],
    )
    out = root / "out"
    # The folders a traversal would pass through, so that nothing fails for lack of them.
    for folder in ("chapter/rmm_time_x", "blog/latency_x", "other/mm-x"):
        (out / FIGURES_DIR / folder).mkdir(parents=True)
    before = _files(tmp_path)

    written = write_report([results], out)

    new = _files(tmp_path) - before
    assert new and all(path.is_relative_to(out) for path in new), sorted(new)
    assert not list(tmp_path.rglob("PWNED*"))
    for path in written:
        assert path.resolve().is_relative_to(out.resolve())
        assert path.parent == out or path.is_relative_to(out / FIGURES_DIR)


def _images(markdown: str) -> dict[str, str]:
    """Every figure of the Markdown: caption -> target."""
    return dict(re.findall(r"^!\[(.*)\]\(([^)]*)\)$", markdown, re.M))


@pytest.mark.slow
def test_values_that_sanitise_alike_get_different_names(tmp_path):
    dtypes = ["float32", "a_b", "a/b", "a\\b", ".float32"]
    lines: list[dict[str, Any]] = [_run("chapter", preset="chapter"), _run("other")]
    for dtype in dtypes:
        lines += [_point("chapter", op="rmm", dtype=dtype, shape=(n, n, n)) for n in (64, 128)]
        lines.append(_point("other", dtype=dtype, shape=NOT_SQUARE))
    lines.append(_point("other", op="xyz", batch=4, shape=NOT_SQUARE))
    out = tmp_path / "out"
    write_report([_write(tmp_path / "results", lines)], out)
    markdown = (out / "report.md").read_text()

    images = _images(markdown)
    chapter = {caption: target for caption, target in images.items() if caption.startswith("rmm:")}
    assert len(chapter) == len(dtypes)
    assert len(set(chapter.values())) == len(dtypes)
    assert all((out / target).is_file() for target in images.values())
    # Ordinary values keep the names they always had.
    assert chapter["rmm: median kernel time against N (float32)."] == (
        f"{FIGURES_DIR}/chapter/rmm_time_float32.png"
    )
    assert chapter["rmm: median kernel time against N (a\\_b)."] == (
        f"{FIGURES_DIR}/chapter/rmm_time_a_b.png"
    )
    folders = {Path(target).parent.name for target in images.values() if "/other/" in target}
    assert {"mm-float32", "mm-a_b", "xyz-float32-b4"} <= folders
    assert len(folders) == len(dtypes) + 1


# ---------------------------------------------------------------------------
# 2. Never through a link; folders that cannot be folders say so in one line.


def _small_report(folder: Path) -> Path:
    return _write(
        folder,
        [
            _run("chapter", preset="chapter"),
            *(_point("chapter", op="rmm", shape=(n, n, n)) for n in (64, 128)),
        ],
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        "report.html",
        "report.md",
        f"{FIGURES_DIR}/chapter/rmm_time_float32.png",
        f"{FIGURES_DIR}/chapter/rmm_time_float32.svg",
    ],
)
def test_a_link_in_the_report_folder_is_refused_not_followed(tmp_path, name):
    results = _small_report(tmp_path / "results")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "out"
    link = out / name
    link.parent.mkdir(parents=True)
    link.symlink_to(victim)

    with pytest.raises(UnsafePath, match="link"):
        write_report([results], out)
    assert victim.read_text() == "precious"
    assert link.is_symlink()


def test_a_linked_figures_folder_is_refused(tmp_path):
    results = _small_report(tmp_path / "results")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / FIGURES_DIR).symlink_to(elsewhere, target_is_directory=True)

    with pytest.raises(UnsafePath, match="link"):
        write_report([results], out)
    assert not list(elsewhere.iterdir())


def test_a_report_folder_under_a_file_is_a_one_line_error(tmp_path):
    results = _small_report(tmp_path / "results")
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(UnsafePath) as raised:
        write_report([results], blocker / "out")
    assert "\n" not in str(raised.value) and "is not a folder" in str(raised.value)
    with pytest.raises(UnsafePath):
        plots.draw(load([results])[1], blocker)


@pytest.mark.slow
def test_plots_refuse_a_linked_figure(tmp_path):
    points = load([_small_report(tmp_path / "results")])[1]
    victim = tmp_path / "victim.svg"
    victim.write_text("precious")
    folder = tmp_path / "figures"
    folder.mkdir()
    (folder / "runtime_all.svg").symlink_to(victim)
    with pytest.raises(UnsafePath, match="link"):
        plots.draw(points, folder)
    assert victim.read_text() == "precious"


@pytest.mark.slow
def test_figures_are_written_whole_and_leave_no_temporary_files(tmp_path):
    points = load([_small_report(tmp_path / "results")])[1]
    folder = tmp_path / "figures"
    written = plots.draw(points, folder)
    assert sorted(path.name for path in folder.iterdir()) == sorted(p.name for p in written)
    for path in written:
        head = path.read_bytes()[:8]
        assert head.startswith(b"\x89PNG") if path.suffix == ".png" else b"<?xml" in head


# ---------------------------------------------------------------------------
# 3. The Markdown shows the results' strings as text, never as markup.

HOSTILE = (
    "q\n```\n# heading\n<script>alert(1)</script>\n"
    "[x](javascript:alert(1)) ![i](http://evil/x.png) a|b *b* _i_ `c` $m$ \\"
)


def _hostile_results(folder: Path) -> Path:
    lines = [
        _run(HOSTILE, host=HOSTILE),
        _run("chapter", preset="chapter"),
        _run("blog", preset="blog", host=HOSTILE),
    ]
    lines[0]["devices"] = {HOSTILE: {"name": HOSTILE, "platform": HOSTILE}}
    lines[0]["environment"]["command"] = HOSTILE
    hostile: dict[str, Any] = {"label": HOSTILE, "device": HOSTILE, "variant": HOSTILE}
    lines += [
        _point(HOSTILE, shape=NOT_SQUARE, **hostile),
        _point(HOSTILE, shape=(100, 60, 31), dtype=HOSTILE, status="mismatch", **hostile),
        _point(HOSTILE, shape=(100, 60, 32), status="error", reason=HOSTILE, **hostile),
        _point(HOSTILE, shape=(100, 60, 33), status="skipped", reason=HOSTILE, **hostile),
        *(
            _point("chapter", op="rmm", dtype=dtype, shape=(n, n, n), **hostile)
            for dtype in (HOSTILE, "float32")
            for n in (64, 128)
        ),
        *(_point("blog", dtype=dtype, **hostile) for dtype in (HOSTILE, "float32")),
    ]
    return _write(folder, lines)


def _outside_fences(markdown: str) -> tuple[list[str], int]:
    """The lines outside fenced code blocks (CommonMark's rule) and the number of blocks."""
    outside: list[str] = []
    fence = ""
    blocks = 0
    for line in markdown.splitlines():
        found = re.match(r" {0,3}(`{3,}|~{3,})", line)
        if fence:
            closing = found and found.group(1)[0] == fence[0] and len(found.group(1)) >= len(fence)
            if closing and not line.strip().strip(fence[0]):  # a closing fence has nothing else
                fence = ""
            continue
        if found and not (found.group(1)[0] == "`" and "`" in line[found.end() :]):
            fence = found.group(1)
            blocks += 1
            continue
        outside.append(line)
    assert not fence, "a fenced block is never closed"
    return outside, blocks


UNESCAPED = r"(?<!\\)(?:\\\\)*"  # an even number of backslashes before: the next is live


def _live(pattern: str, text: str) -> list[str]:
    return re.findall(UNESCAPED + pattern, text)


@pytest.fixture(scope="module")
def hostile_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("hostile")
    out = root / "out"
    write_report([_hostile_results(root / "results")], out)
    return {
        "md": (out / "report.md").read_text(encoding="utf-8"),
        "html": (out / "report.html").read_text(encoding="utf-8"),
    }


@pytest.mark.slow
def test_hostile_strings_keep_the_fences_balanced(hostile_report):
    markdown = hostile_report["md"]
    _, blocks = _outside_fences(markdown)
    # One fenced log per experiment (other, chapter, blog), in the appendix, and no other fence.
    assert blocks == len(re.findall(r"^### .*: every point \(\d+\)$", markdown, re.M)) == 3


def test_hostile_strings_are_no_markup_in_the_markdown(hostile_report):
    outside, _ = _outside_fences(hostile_report["md"])
    text = "\n".join(outside)
    assert "<" not in text  # no HTML at all: no <script>, no <img>, no autolink
    for line in outside:
        assert not re.match(r" {0,3}#+ *heading", line), line
        if line.startswith("#"):
            assert not _live("#", line.lstrip("#")), line  # no heading made by the data
        assert not re.match(r" {0,3}(```|~~~|>|[-+*] |\d+[.)] )", line) or line.startswith(
            "- **"
        ), line
    # The only links are the report's own figures.
    assert all(target.startswith(f"{FIGURES_DIR}/") for target in _live(r"\]\(([^)]*)", text))
    assert len(_live(r"\[", text)) == len(_live(r"!\[", text)) == len(_images("\n".join(outside)))
    assert not _live(r"\]\(javascript:", text) and not _live(r"\]\(http", text)
    words = [line for line in outside if not line.startswith("![")]
    words_text = "\n".join(words).replace("**WRONG**", "").replace("**ERROR**", "")
    assert not _live("[`*_$]", words_text)
    # The strings are shown, escaped, not dropped.
    assert "\\[x\\](javascript:alert(1))" in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "q \\`\\`\\` \\# heading" in text


def test_hostile_strings_keep_every_table_in_shape(hostile_report):
    outside, _ = _outside_fences(hostile_report["md"])
    tables: list[list[str]] = []
    previous = False
    for line in outside:
        if line.startswith("|"):
            if not previous:
                tables.append([])
            tables[-1].append(line)
        previous = line.startswith("|")
    assert len(tables) >= 6
    for table in tables:
        pipes = {len(_live(r"\|", row)) for row in table}
        assert len(pipes) == 1, table
    machines = "\n".join(outside[outside.index("## Machines") :])
    assert re.search(r"^\| host \| q \\`\\`\\` \\# heading &lt;script&gt;", machines, re.M)


def test_hostile_strings_are_escaped_in_the_page(hostile_report):
    page = hostile_report["html"]
    assert "<script" not in page and "<a " not in page and "http://evil" in page
    assert html.escape(HOSTILE.splitlines()[3]) in page


def test_the_log_of_a_hostile_point_is_one_line(hostile_report):
    """A newline in a label cannot forge a line of the log ("ok ..." under a wrong result)."""
    markdown = hostile_report["md"]
    log = markdown[markdown.index("every point") :]
    fenced = [line for line in log.splitlines() if "alert(1)</script>" in line]
    assert fenced and all(re.match(r"(ok|WRONG|ERROR|skipped) ", line) for line in fenced)


# ---------------------------------------------------------------------------
# 4. A dollar sign in a label is a dollar sign.

MATH: dict[str, Any] = {"label": "a$x^{", "device": "b$x^{", "variant": "$\\frac{1}{0}$"}


def _svg_texts(folder: Path) -> str:
    texts = []
    for path in folder.rglob("*.svg"):
        texts += re.findall(r"<text[^>]*>([^<]*)</text>", path.read_text())
    return "\n".join(html.unescape(text) for text in texts)


@pytest.mark.slow
def test_dollars_in_the_results_are_drawn_as_they_are(tmp_path):
    lines: list[dict[str, Any]] = [
        _run("chapter", preset="chapter"),
        _run("blog", preset="blog"),
        _run("lab", preset="lab"),
        _run("other"),
    ]
    for dtype in ("$\\alpha$", "float32"):
        lines += [
            _point("chapter", op="rmm", dtype=dtype, shape=(n, n, n), **MATH) for n in (64, 128)
        ]
        lines.append(_point("blog", dtype=dtype, **MATH))
        lines.append(_point("blog", dtype=dtype, status="mismatch", **{**MATH, "variant": "$v"}))
        lines.append(_point("other", dtype=dtype, shape=NOT_SQUARE, **MATH))
    for n in (64, 128):
        lines.append(_point("lab", shape=(n, n, n), **{**MATH, "variant": "naive"}))
        lines.append(_point("lab", shape=(n, n, n), **{**MATH, "variant": "tiled"}))
    lines.append(_point("blog", status="error", reason="$x$y$", **{**MATH, "variant": "w"}))
    results = _write(tmp_path / "results", lines)
    out = tmp_path / "out"
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # text as text, to be read back
        write_report([results], out)
        plots.draw(load([results])[1], tmp_path / "plots")
    drawn = _svg_texts(out)
    for text in ("a$x^{: b$x^{", "$\\frac{1}{0}$ T=16", "$\\alpha$", "a$x^{ T=16", "error"):
        assert text in drawn, text
    plotted = _svg_texts(tmp_path / "plots")
    # The label is a panel's title and the variant a legend entry (ladder.svg).
    for text in ("a$x^{: b$x^{", "$\\frac{1}{0}$ T=16", "a$x^{ naive T=16"):
        assert text in plotted, text


# ---------------------------------------------------------------------------
# 5. Bad lines are warnings; odd values are shown, never a traceback.


@pytest.mark.slow
def test_the_loaders_warnings_are_printed_and_the_report_goes_on(tmp_path, monkeypatch, capsys):
    results = _small_report(tmp_path / "results")

    def fake_load(paths: Any, *, warn: Any) -> Any:
        warn("results.jsonl:3: M is not a positive integer: 'abc'")
        warn("results.jsonl:4: \x1b[2Jnot a JSON line")
        return load(paths)

    monkeypatch.setattr(report, "load", fake_load)
    write_report([results], tmp_path / "out")
    errors = capsys.readouterr().err.splitlines()
    assert errors == [
        "xbackend: warning: results.jsonl:3: M is not a positive integer: 'abc'",
        "xbackend: warning: results.jsonl:4: \\x1b[2Jnot a JSON line",
    ]
    assert (tmp_path / "out" / "report.md").is_file()


@pytest.mark.slow
def test_a_bad_line_in_the_middle_is_skipped_with_a_warning(tmp_path, capsys):
    results = _small_report(tmp_path / "results")
    jsonl = results / "results.jsonl"
    good = jsonl.read_text().splitlines()
    jsonl.write_text("\n".join([good[0], "not json", '{"type": "point"}', *good[1:]]) + "\n")
    write_report([results], tmp_path / "out")
    errors = capsys.readouterr().err
    assert f"xbackend: warning: {jsonl}:2:" in errors
    assert f"xbackend: warning: {jsonl}:3:" in errors
    assert "| 128 |" in (tmp_path / "out" / "report.md").read_text()


@pytest.mark.slow
def test_odd_runs_and_points_are_shown_not_a_traceback(tmp_path):
    bare: dict[str, Any] = {"type": "run", "run_id": "bare"}  # no plan, no environment, no devices
    odd: dict[str, Any] = {
        "type": "run",
        "run_id": "odd",
        "timestamp": 5,
        "environment": {"packages": ["numpy"], "cpu_count": "many", "git_commit": 7},
        "plan": {"shapes": [[1, 2], "64x64", [64, 64, "x"]], "dtypes": [["x"], 3], "preset": 4},
        "devices": {"cuda": "a GPU", "cpu": {"name": None, "global_mem_bytes": "lots"}},
    }
    skipped = _point("bare", status="skipped", reason="\n")
    skipped["kernel_s"] = {"n": 0}
    lines = [
        bare,
        odd,
        _point("odd", op="xyz", dtype="weird", shape=NOT_SQUARE),
        _point("odd", op="xyz", dtype="weird", variant="tiled", shape=(100, 60, 31)),
        _point("odd", op="xyz", dtype="weird", shape=(64, 64, 64)),
        _point("bare", op="rmm", dtype="weird", status="error"),
        _point("bare", op="bmm", dtype="weird", batch=3),
        skipped,
        _point("gone", tile=1),  # its run header is missing
        _point("gone", tile=None, seconds=0.0),
        _point("gone", variant="tiled", shape=(0, 64, 64)),
    ]
    out = tmp_path / "out"
    write_report([_write(tmp_path / "results", lines)], out)
    markdown = (out / "report.md").read_text()
    assert "xyz" in markdown and "weird" in markdown and "### Run bare" in markdown


@pytest.mark.slow
def test_plots_draw_points_of_older_files_without_op_or_dtype(tmp_path):
    point = _point("old")
    for field in ("op", "dtype", "batch", "gflops"):
        del point[field]
    points = [PointRecord.from_dict(point), PointRecord.from_dict({**point, "M": 128, "N": 128})]
    written = plots.draw(points, tmp_path / "figures")
    assert {path.name for path in written} >= {"runtime_all.png", "gflops.svg"}
