"""Issue 38 (reliability round 4), the kernel families' side: manifests and sources read
with bounds, refused by name, and parsed in linear time.

Each family is made in ``tmp_path`` from the student's files (examples/assignment/student),
its manifest written by the test; every refusal is one ``ManifestError`` naming the file.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path

import pytest

from xbackend import families
from xbackend.families.expressions import ExpressionError, evaluate
from xbackend.families.manifest import ManifestError
from xbackend.families.sources import kernels_of, with_hooks
from xbackend.grading.checking import EDGE_SHAPES, check_variant
from xbackend.pytest_plugin import needs_backend

ROOT = Path(__file__).resolve().parent.parent
STUDENT = ROOT / "examples" / "assignment" / "student"
SEED = 20261126

MANIFEST = """
[family]
name = "{name}"
dtypes = ["float32"]
tiles = [8, 16]
build = {{ BLOCK_SIZE = "TILE" }}
arguments = {{ hA = "M", wA = "K", wB = "N" }}
[[variant]]
name = "{variant}"
kernel = "matmul_naive"
"""


def _family(
    parent: Path, extra: str = "", variant: str = "mine", name: str = "mine", source: str = ""
) -> Path:
    """A family folder: the student's OpenCL kernels (or ``source``) and a manifest."""
    folder = parent / name
    folder.mkdir()
    (folder / "family.toml").write_text(MANIFEST.format(name=name, variant=variant) + extra)
    (folder / f"{name}.cl").write_text(source or (STUDENT / "student.cl").read_text())
    return folder


def _refused(folder: Path) -> str:
    with pytest.raises(ManifestError) as caught:
        families.use_folders([folder])  # refused: this process's folders stay as they were
    message = str(caught.value)
    assert "\n" not in message and str(folder) in message, message
    return message


@pytest.fixture
def catalogue(own_families):
    """This test's own catalogue: only the folders it adds."""


# -- 1: a user's variant never takes the name of one of xbackend's lines -----------------------


@pytest.mark.parametrize("name", ["vendor", "naive", "naive4", "warp_db", "reg2d"])
def test_a_users_variant_named_as_a_shipped_line_is_refused(name, tmp_path):
    """vendor (the library's line, for every operation) and the
    shipped kernels' names, also those of another operation (naive4 is rmm's)."""
    message = _refused(_family(tmp_path, variant=name))
    assert f"variant '{name}'" in message and "already declared" in message


def test_a_users_variant_with_a_name_of_its_own_is_kept(tmp_path, catalogue):
    families.add_folders([_family(tmp_path, variant="vendor_like")])
    assert "vendor_like" in families.user_variants(["mm"])


# -- 4: a family with no kernel file -----------------------------------------------------------


@pytest.mark.parametrize("sources", ["{}", "{ }"])
def test_sources_naming_no_file_is_refused(sources, tmp_path):
    folder = _family(tmp_path)
    manifest = folder / "family.toml"
    manifest.write_text(
        manifest.read_text().replace("[family]\n", f"[family]\nsources = {sources}\n")
    )
    assert "names no kernel file" in _refused(folder)


# -- 8: a size that has no value at the tile is that kernel's verdict, naming its file ---------


BUILDS = {
    "zero": 'build = { BLOCK_SIZE = "TILE", SPLIT = "TILE / 0" }',
    "uneven": 'build = { BLOCK_SIZE = "TILE", SPLIT = "TILE / 3" }',
    "modulo zero": 'build = { BLOCK_SIZE = "TILE", SPLIT = "TILE % (TILE - TILE)" }',
    "staged": 'staged = "TILE // (TILE - 16)"',
}


@pytest.mark.parametrize("case", BUILDS, ids=str)
def test_a_build_with_no_value_at_the_tile_is_not_run_with_the_reason(case, tmp_path, catalogue):
    needs_backend("opencl")
    import xbackend

    # The variant's own key replaces the family's (build), or adds one (staged).
    extra = f"default_tile = 16\n{BUILDS[case]}\n"
    folder = _family(tmp_path, extra)
    families.add_folders([folder, _family(tmp_path, variant="fine", name="fine")])
    backend = xbackend.get_backend("opencl")
    try:
        [verdict] = check_variant("opencl", backend, "mine", EDGE_SHAPES, SEED)
        assert verdict.equal is None and str(folder / "family.toml") in verdict.detail
        assert "tile 16" in verdict.detail
        fine = list(check_variant("opencl", backend, "fine", EDGE_SHAPES[:3], SEED))
        assert len(fine) == 3 and all(v.equal for v in fine)
    finally:
        backend.close()


# -- 10: parsing is linear in the text ---------------------------------------------------------


PATHOLOGICAL = {
    "kernel words": "kernel ",
    "__global__ words": "__global__ ",
    "comment openers": "/*\n",
    "line comments": "//\n",
    "open parameter lists": "kernel void f(",
    "open attributes": "__kernel __attribute__((",
    "open launch bounds": "__global__ __launch_bounds__(",
    "escaped quotes": '"\\"\\',
    "quotes": "'\"",
    "bodies": "kernel void f(int a){",
    "closed kernels": "kernel void f(int a) { if (a) return; }\n",
    "words before void": "kernel a b c d e f g h i j k l m n o p q r s t\n",
}


@pytest.mark.parametrize("case", PATHOLOGICAL, ids=str)
def test_a_megabyte_of_pathological_source_parses_within_seconds(case):
    """A bound on a pathological case (was minutes to hours), not a comparison of timings."""
    unit = PATHOLOGICAL[case]
    text = unit * ((1 << 20) // len(unit))
    for parse in (kernels_of, with_hooks):
        started = time.perf_counter()
        with contextlib.suppress(ValueError):  # a kernel's body not closed: said, in time
            parse(text)
        assert time.perf_counter() - started < 2.0, (case, parse.__name__)


def test_declarations_are_still_read_as_people_write_them():
    source = (
        'extern "C" __global__ __launch_bounds__(256) void f(float* a, int b) {}\n'
        "/* kernel void hidden(int x) */\n"
        "__kernel __attribute__((reqd_work_group_size(16, 16, 1))) void g(__global float* C)\n"
        "{ return; }\n"
        "kernel void h(void) { }\n"
    )
    found = kernels_of(source)
    assert found == {
        "f": ((("a", "float*"), ("b", "int")), 1),
        "g": ((("C", "__global float*"),), 3),
        "h": ((), 5),
    }
    stamped = with_hooks(source)
    assert stamped.count("STAMP_PARAMETER") == 3 and "STAMP_RETURN;" in stamped
    assert "hidden(int x) STAMP" not in stamped


# -- 13: deep expressions are refused by name --------------------------------------------------


DEEP = {
    "3000 terms": 'staged = "' + " + ".join(["TILE"] * 3000) + '"',
    "1500 factors": 'build = { BLOCK_SIZE = "' + " * ".join(["TILE"] * 1500) + '" }',
    "nested negations": 'staged = "' + "-" * 600 + 'TILE"',
    "long rule": 'requires = ["' + " and ".join(["TILE > 0"] * 400) + '"]',
    "nested arrays": "tiles = " + "[" * 5000 + "]" * 5000,
}


@pytest.mark.parametrize("case", DEEP, ids=str)
def test_a_deep_manifest_is_refused_naming_its_file(case, tmp_path):
    message = _refused(_family(tmp_path, DEEP[case] + "\n"))
    assert "deep" in message or "characters" in message, message


def test_expressions_within_the_limits_still_evaluate():
    assert evaluate(" + ".join(["TILE"] * 50), {"TILE": 16}) == 800
    assert evaluate("-" * 20 + "TILE", {"TILE": 16}) == 16
    with pytest.raises(ExpressionError, match="deep"):
        evaluate("-" * 200 + "TILE", {"TILE": 16})


# -- 14: what is read is bounded, and an include is a regular file -----------------------------


def test_a_sparse_manifest_of_8_gb_is_refused_without_reading_it(tmp_path):
    folder = _family(tmp_path)
    os.truncate(folder / "family.toml", 8 << 30)
    started = time.perf_counter()
    message = _refused(folder)
    assert "larger than" in message and time.perf_counter() - started < 5


@pytest.mark.parametrize("size", [5 << 20, 8 << 30])
def test_a_sparse_kernel_file_is_refused_by_name(size, tmp_path):
    folder = _family(tmp_path)
    os.truncate(folder / "mine.cl", size)
    message = _refused(folder)
    assert "mine.cl" in message and "larger than" in message


def _including(tmp_path: Path, named: str) -> Path:
    source = f'#include "{named}"\n' + (STUDENT / "student.cl").read_text()
    return _family(tmp_path, source=source)


@pytest.mark.parametrize("named", ["/dev/zero", "/dev/urandom", "fifo.h", "."])
def test_an_include_of_what_is_not_a_regular_file_is_refused(named, tmp_path):
    folder = _including(tmp_path, named)
    if named == "fifo.h":
        os.mkfifo(folder / "fifo.h")
    message = _refused(folder)
    assert "mine.cl line 1" in message and named in message


def test_an_include_is_followed_into_the_files_it_includes(tmp_path):
    folder = _including(tmp_path, "helpers.h")
    (folder / "helpers.h").write_text('#define TWICE(x) (2 * (x))\n#include "/dev/zero"\n')
    message = _refused(folder)
    assert "helpers.h line 2" in message and "/dev/zero" in message


def test_a_regular_include_is_kept(tmp_path, catalogue):
    folder = _including(tmp_path, "helpers.h")
    (folder / "helpers.h").write_text("#define TWICE(x) (2 * (x))\n")
    families.add_folders([folder])
    assert "mine" in families.user_variants(["mm"])


# -- 22: the manifest's values are checked as it is read ---------------------------------------


VALUES = {
    "family description": ("[family]\n", "[family]\ndescription = 5\n", "description must be text"),
    "family description list": ("[family]\n", '[family]\ndescription = ["a"]\n', "text"),
    "default tile true": ("tiles = [8, 16]", "tiles = [1, 16]\ndefault_tile = true", "integer"),
    "default tile text": ("tiles = [8, 16]", 'tiles = [8, 16]\ndefault_tile = "16"', "integer"),
    "default tile float": ("tiles = [8, 16]", "tiles = [8, 16]\ndefault_tile = 16.0", "integer"),
}


@pytest.mark.parametrize("case", VALUES, ids=str)
def test_a_value_of_the_wrong_type_is_refused_naming_its_file(case, tmp_path):
    old, new, words = VALUES[case]
    folder = _family(tmp_path)
    manifest = folder / "family.toml"
    manifest.write_text(manifest.read_text().replace(old, new, 1))
    assert words in _refused(folder)


@pytest.mark.parametrize("parameter", ["stamps", "stamp_slot"])
def test_a_kernel_parameter_with_a_name_the_clock_keeps_is_refused(parameter, tmp_path):
    source = (STUDENT / "student.cl").read_text().replace("int wB)", f"int wB, int {parameter})")
    folder = _family(tmp_path, source=source)
    message = _refused(folder)
    assert f"parameter '{parameter}'" in message and "mine.cl line" in message


def test_the_student_family_still_loads(tmp_path, catalogue):
    folder = tmp_path / "student"
    shutil.copytree(STUDENT, folder)
    families.add_folders([folder])
    assert families.user_variants(["mm"]) == ["student_naive", "student_tiled"]
