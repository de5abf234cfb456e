"""Kernel families as data: the manifests, a user's folder of kernels, and ``check``.

A user's kernels under their own names and argument order run beside the shipped ones;
a wrong manifest is one line naming its file; ``check`` finds an edge bug at the shapes
where it is wrong and nowhere else.
"""

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import xbackend
from xbackend import families
from xbackend.families.expressions import ExpressionError, evaluate
from xbackend.families.manifest import ManifestError
from xbackend.families.manifest import load as load_family
from xbackend.grading.checking import EDGE_SHAPES, check_variant, schedule
from xbackend.operations import Shape, make_operands
from xbackend.problems import Reference, check
from xbackend.pytest_plugin import needs_backend
from xbackend.results import load

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "assignment"
SEED = 20261125


@pytest.fixture
def student(tmp_path, own_families):
    """The example folders copied, and on the catalogue of this test alone."""
    folder = tmp_path / "kernels"
    shutil.copytree(EXAMPLES, folder)
    families.add_folders([folder])
    return folder


@pytest.fixture
def opencl():
    needs_backend("opencl")
    backend = xbackend.get_backend("opencl")
    yield backend
    backend.close()


def test_the_shipped_manifests_give_the_ladder_in_order():
    table = families.variant_table("opencl", "work-item", "local")
    assert list(table["mm"]) == [
        "naive", "tiled", "reg1d", "reg2d", "reg2d_cf", "reg2d_g4",
        "vec4", "vec4_db", "warp", "warp_db", "warp_async",
    ]  # fmt: skip
    assert list(table["rmm"]) == ["naive4", "naive", "tiled", "vec4_db", "warp_db"]
    reg1d = table["mm"]["reg1d"]
    assert reg1d.per_thread(64) == (8, 1) and reg1d.names_at(64)["THREADS"] == 512
    assert "work-item" in table["mm"]["naive"].description
    assert "local memory" in table["mm"]["warp_async"].description
    assert table["mm"]["warp_async"].asynchronous and not table["mm"]["warp_db"].asynchronous


def test_expressions_are_arithmetic_and_nothing_more():
    assert evaluate("2 * BK * TILE", {"BK": 8, "TILE": 64}) == 1024
    assert evaluate("THREADS % TILE == 0 and TM % 4 == 0", {"THREADS": 256, "TILE": 64, "TM": 8})
    with pytest.raises(ExpressionError, match="not a whole number"):
        evaluate("TILE / 3", {"TILE": 16})
    for hostile in ("__import__('os')", "TILE.bit_length()", "[1][0]", "1.5", "'x'"):
        with pytest.raises(ExpressionError):
            evaluate(hostile, {"TILE": 16})


def _family(tmp_path: Path, manifest: str, source: str | None = None) -> Path:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "family.toml").write_text(manifest)
    (folder / "mine.cl").write_text(source or (EXAMPLES / "student" / "student.cl").read_text())
    return folder


GOOD = """
[family]
build = { BLOCK_SIZE = "TILE" }
arguments = { hA = "M", wA = "K", wB = "N" }
tiles = [16]
[[variant]]
name = "mine"
kernel = "matmul_naive"
"""
BROKEN = {
    "toml": (GOOD + "this is = = not toml", "line"),
    "unknown key": (GOOD + "tile = 16\n", "unknown key 'tile'"),
    "no kernel": (GOOD.replace('"matmul_naive"', '"matmul"'), "declares no kernel 'matmul'"),
    "unbound": (GOOD.replace('wA = "K", ', ""), "parameter 'wA' of matmul_naive"),
    "wrong binding": (GOOD.replace('"K"', '"k"'), "arguments.wA = 'k'"),
    "default tile": (
        GOOD.replace("tiles = [16]", "tiles = [16]\ndefault_tile = 8"),
        "default_tile 8",
    ),
    "bmm": (GOOD + 'ops = ["mm", "bmm"]\n', "takes no parameter bound to strideA"),
    "expression": (GOOD + 'staged = "2 * TILES"\n', "uses TILES"),
    "twice": (GOOD + GOOD[GOOD.index("[[variant]]") :], "declared twice"),
    "shipped name": (GOOD.replace('name = "mine"', 'name = "tiled"'), "already declared"),
}


@pytest.mark.parametrize("case", BROKEN, ids=str)
def test_a_wrong_manifest_is_one_line_naming_its_file(case, tmp_path, own_families):
    manifest, words = BROKEN[case]
    folder = _family(tmp_path, manifest)
    with pytest.raises(ManifestError) as caught:
        families.add_folders([folder])
    message = str(caught.value)
    assert str(folder) in message and words in message and "\n" not in message


def test_the_good_manifest_loads(tmp_path):
    family = load_family(_family(tmp_path, GOOD))
    [(op, spec)] = family.variants
    assert (op, spec.name, spec.takes("wA"), spec.takes("C")) == ("mm", "mine", "K", "C")


def test_the_command_line_names_a_wrong_manifest_without_a_traceback(tmp_path):
    from conftest import xbackend_here

    folder = _family(tmp_path, BROKEN["unbound"][0])
    done = xbackend_here("compare", "--kernels", str(folder), "--dry-run", "--backends", "cpu")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and f"{folder}/family.toml" in done.stderr


def test_a_students_kernels_under_their_own_names_compute_the_product(student, opencl):
    assert {"student_naive", "student_tiled", "edge_bug_tiled"} <= set(opencl.variants("mm"))
    rng = np.random.default_rng(SEED)
    A = rng.uniform(-1, 1, (45, 70)).astype(np.float32)
    B = rng.uniform(-1, 1, (70, 33)).astype(np.float32)
    for variant in ("student_naive", "student_tiled"):
        for tile in (8, 16):
            assert check(opencl.matmul(A, B, variant, tile), Reference.of(A, B)).equal
    # A strided view reaches a kernel without leading dimensions as compact rows.
    view = rng.uniform(-1, 1, (45, 140)).astype(np.float32)[:, ::2]
    assert check(opencl.matmul(view, B, "student_tiled"), Reference.of(view, B)).equal
    problem = opencl.variant_problem("student_naive", np.dtype(np.float64))
    assert problem is not None and "float32 only" in problem


def test_check_finds_the_edge_bug_where_it_is_and_nowhere_else(student, opencl):
    """edge_bug_tiled leaves out K's last partial tile: wrong exactly where its tile (16)
    does not divide K. The student's kernels are right everywhere."""
    shapes = [*EDGE_SHAPES, *schedule(10)]
    verdicts = list(check_variant("opencl", opencl, "edge_bug_tiled", shapes, SEED))
    wrong = {v.shape for v in verdicts if v.equal is False}
    assert wrong == {s for s in shapes if s.K % 16}
    assert all(v.equal is True for v in verdicts if v.shape not in wrong)
    for variant in ("student_naive", "student_tiled"):
        found = list(check_variant("opencl", opencl, variant, shapes, SEED))
        assert len(found) == len(shapes) and all(v.equal for v in found)


def test_a_kernel_that_does_not_build_is_a_verdict_not_a_crash(tmp_path, opencl, own_families):
    source = (EXAMPLES / "student" / "student.cl").read_text().replace("sum += A", "sum +=+ A;!")
    folder = _family(tmp_path, GOOD, source)
    families.add_folders([folder])
    [verdict] = check_variant("opencl", opencl, "mine", [Shape(5, 6, 7)], SEED)
    assert verdict.equal is None and "compile" in verdict.detail
    A, B = make_operands(Shape(5, 6, 7), SEED)
    with pytest.raises(xbackend.XBackendError, match=r"mine\.cl"):
        opencl.matmul(A, B, "mine")


@pytest.mark.slow
def test_compare_runs_the_users_kernels_beside_the_shipped_ones(tmp_path):
    from conftest import xbackend_here

    needs_backend("opencl")
    out = tmp_path / "run"
    done = xbackend_here(
        "compare", "--backends", "opencl", "--kernels", str(EXAMPLES / "student"),
        "--steps", "3", "--no-plots", "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    records = load([out])
    variants = {p.variant for p in records.points}
    assert {"naive", "tiled", "student_naive", "student_tiled"} <= variants
    assert all(p.equal for p in records.points if p.variant.startswith("student"))
    kernels = next(iter(records.runs.values())).environment["kernels"]
    assert kernels["student"]["folder"] == str(EXAMPLES / "student")


@pytest.mark.skipif(shutil.which("cpp") is None, reason="no C preprocessor (cpp)")
@pytest.mark.parametrize("suffix", [".cl", ".cu"])
def test_hooks_put_into_a_users_kernels_are_nothing_without_stamp(suffix, tmp_path):
    """A user's kernels time themselves on the device clock like the shipped ones: the
    hooks go in where they belong (after the last parameter, as the body opens, before
    each return and as it closes), compile to nothing without STAMP, keep the file's
    line numbers, and stamp every kernel with it."""

    from test_stamps import _preprocessed

    from xbackend.families.sources import kernels_of, with_hooks

    path = EXAMPLES / "student" / f"student{suffix}"
    text = path.read_text()
    hooked = with_hooks(text)
    assert with_hooks(hooked) == hooked  # a file with its hooks is left as it is
    copy = tmp_path / path.name
    copy.write_text(hooked)
    bare = _preprocessed(text, path)
    assert _preprocessed(hooked, copy) == bare
    stamped = _preprocessed(hooked, copy, "-DSTAMP")
    assert stamped.count("stamp_slot") >= 2 * len(kernels_of(text)) and stamped != bare
    # Every line of the file stays on its line after "#line 1": a compiler's line
    # numbers are the file's, and only hook words are added to a line.
    head, lines = hooked.splitlines()[:2], hooked.splitlines()[2:]
    assert head == ['#include "stamp.h"', "#line 1"] and len(lines) == len(text.splitlines())
    for original, now in zip(text.splitlines(), lines, strict=True):
        words = re.sub(r"STAMP_(?:PARAMETER|ENTER;|EXIT;)|\s", "", now)
        assert words.replace("STAMP_RETURN", "return") == re.sub(r"\s", "", original)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_a_stamped_build_of_a_users_cuda_kernels_reads_the_globaltimer(tmp_path):
    import subprocess

    from xbackend.families.sources import with_hooks

    source = tmp_path / "student.cu"
    source.write_text(with_hooks((EXAMPLES / "student" / "student.cu").read_text()))
    ptx = tmp_path / "k.ptx"
    subprocess.run(
        ["nvcc", "-ptx", "-arch=sm_90", "-DSTAMP", "-DBLOCK_SIZE=16", "-I",
         str(ROOT / "kernels" / "cuda"), str(source), "-o", str(ptx)],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    code = ptx.read_text()
    assert code.count("%globaltimer") >= 4  # entry and exit of both kernels
    # Each kernel's exits: the naive one's early return, and both bodies' ends.
    assert code.count("atom.global.min.u64") + code.count("red.global.min.u64") == 3


def test_twins_that_disagree_on_their_parameters_are_refused(tmp_path, own_families):
    """A launch names its arguments once for both languages: a .cu declaring another
    order than its .cl would get its arguments in the wrong order, unseen."""
    folder = _family(tmp_path, GOOD)
    cuda = (EXAMPLES / "student" / "student.cu").read_text()
    (folder / "mine.cu").write_text(
        cuda.replace("int hA, int wA, int wB", "int wA, int hA, int wB")
    )
    with pytest.raises(ManifestError, match="the twins must agree"):
        families.add_folders([folder])
    (folder / "mine.cu").write_text(cuda)
    families.add_folders([folder])  # the same order in both: accepted


def test_a_kernel_declared_before_its_body_is_stamped_once(tmp_path):
    from xbackend.families.sources import with_hooks

    text = (EXAMPLES / "student" / "student.cl").read_text()
    prototype = (
        "__kernel void matmul_naive(__global float* C, __global const float* A,\n"
        "    __global const float* B, int hA, int wA, int wB);\n\n"
    )
    hooked = with_hooks(prototype + text)
    assert hooked.count("STAMP_ENTER") == 2 and "int wB);" in hooked


def test_a_tile_choice_is_a_cache_entry_of_its_own():
    from xbackend.tuning.entries import entry_problem

    entry = {"params": {"TILE": 32}, "blocks": 64, "tflops": 0.05, "shape": "256×224"}
    assert entry_problem(entry) is None
    assert "TILE" in (entry_problem({**entry, "params": {"TILE": 0}}) or "")
    assert entry_problem({**entry, "params": {"TILE": 16, "BM": 64}}) is not None


@pytest.mark.slow
def test_tune_races_a_users_tiles_and_compare_takes_the_winner(student, opencl, tmp_path,
                                                                monkeypatch):  # fmt: skip
    """A user's family declares its tiles: tune races them (the statistical race of the
    block tiles), caches the winner under the kernel's digest, and a run without --tile
    takes it; a tie keeps the family's default."""
    from xbackend import tuning
    from xbackend.tuning.cache import load_entries

    cache = tmp_path / "tuned.json"
    monkeypatch.setenv(tuning.CACHE_ENV, str(cache))
    opencl.use_choices(tuning.CachedChoices(cache, database=False))
    said: list[str] = []
    results = tuning.tune(
        opencl, ["student_tiled"], [Shape(96, 84, 96)], np.dtype(np.float32),
        samples=3, finalist_time_s=0.5, progress=said.append,
    )  # fmt: skip
    assert [r.variant for r in results] == ["student_tiled"]
    assert {t.config.label for t in results[0].trials} == {"T=8", "T=16", "T=32"}
    assert not any("coarse to fine" in line for line in said)
    ((key, entry),) = load_entries(cache).items()
    assert key.split("|")[2] == "student_tiled" and set(entry["params"]) == {"TILE"}
    assert entry["build"]["kernel"] == opencl.kernel_build("student_tiled")["kernel"]
    expected = None if entry.get("tie") else entry["params"]["TILE"]
    assert opencl.preferred_tile("student_tiled", "mm", np.dtype(np.float32)) == expected


OCLGRIND_LOG = """Invalid read of size 4 at global memory address 0x3000000000114
\tKernel: matmul_unguarded
\tEntity: Global(9,0,0) Local(9,0,0) Group(0,0,0)
\t  %11 = load float, float addrspace(1)* %arrayidx7, align 4, !dbg !44
\tAt line 10 (column 34) of input.cl:
\t  sum += A[row * wA + k] * B[k * wB + col];

Invalid write of size 4 at global memory address 0x4000000000024
\tKernel: matmul_unguarded
\tEntity: Global(9,0,0) Local(9,0,0) Group(0,0,0)
\t  store float %15, float addrspace(1)* %arrayidx12, align 4, !dbg !63
\tAt line 11 (column 23) of input.cl:
\t  C[row * wB + col] = sum;

Write-write data race at local memory address 0x1000000000000
\tKernel: matmul_racy
\tEntity: Global(1,0,0) Local(1,0,0) Group(0,0,0)
\tAt line 7 (column 9) of input.cl:
\t  (source not available)
"""


def test_oclgrinds_reports_are_read_kernel_by_kernel():
    from xbackend.grading.sanitizers import findings as sanitizer_findings

    found = sanitizer_findings(OCLGRIND_LOG)
    assert set(found) == {"matmul_unguarded", "matmul_racy"}
    worst = found["matmul_unguarded"]  # its write, though its read came first
    assert (worst.what, worst.line) == ("Invalid write of size 4 (global)", 11)
    assert worst.writes_out_of_bounds and worst.reads_out_of_bounds
    assert worst.out_of_bounds == "reads and writes"
    assert not found["matmul_racy"].out_of_bounds
    assert found["matmul_racy"].code == "" and found["matmul_racy"].line == 7


@pytest.mark.slow
def test_check_runs_oclgrind_first_and_never_runs_a_kernel_that_writes_out_of_bounds(oclgrind):
    from conftest import kernel_line, xbackend_here

    needs_backend("opencl")
    unguarded = ROOT / "tests" / "kernels" / "unguarded_family"
    done = xbackend_here("check", str(EXAMPLES / "student"), str(unguarded), "--backends",
                         "opencl", "--steps", "2", "--no-times", "--sanitize", "on")  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "unguarded_naive: opencl: WRONG under oclgrind (Invalid write" in done.stdout
    assert "unguarded.cl line 1" in done.stdout  # its line 10 or 11: the file's own numbers
    assert "NOT RUN (not run natively: it reads and writes out of bounds" in done.stdout
    assert "opencl: equal at all 10 shapes" in kernel_line(done.stdout, "student_tiled")
    for clean in ("student_naive", "student_tiled"):  # the clean kernels have no report
        assert "oclgrind" not in kernel_line(done.stdout, clean)


def test_a_patch_is_made_of_the_tile_and_the_constants_alone(tmp_path, own_families):
    """TM and TN are what a patch gives: a patch written in TM would define it by itself."""
    folder = _family(tmp_path, GOOD + 'patch = ["TM", 1]\n')
    with pytest.raises(ManifestError, match="uses TM"):
        families.add_folders([folder])
