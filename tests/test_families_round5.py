"""Issue 54 (reliability round 5), how a family's files and manifest become a launch: a
kernel's declaration as the build sees it (``#if 0`` is dead code), struct parameters
under ``#pragma pack``, twins that agree on a float's width, a kernel's name that is a
name, includes in every spelling, ``XBACKEND_KERNELS`` for a user's family, launches and
workspaces whose sizes have no usable value, and declarations read again after
``families.read_again()`` (issue 55).

The kernels are files: tests/kernels/round5/ (its README says which is which), or the
student's (examples/assignment/student), copied into ``tmp_path`` with a manifest the
test writes.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from xbackend import families
from xbackend.families.manifest import ManifestError
from xbackend.operations import Shape, make_operands
from xbackend.problems import Reference, check
from xbackend.pytest_plugin import needs_backend

ROOT = Path(__file__).resolve().parent.parent
ROUND5 = ROOT / "tests" / "kernels" / "round5"
STUDENT = ROOT / "examples" / "assignment" / "student"
SEED = 20261128
NVCC = shutil.which("nvcc") or (
    "/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").is_file() else ""
)


@pytest.fixture
def catalogue(own_families):
    """This test's own catalogue: only the folders it adds."""


def _student(parent: Path, manifest_edit: tuple[str, str] = ("", "")) -> Path:
    """A copy of the student's family (its .cl file alone), its manifest edited."""
    folder = parent / "student"
    folder.mkdir()
    shutil.copy(STUDENT / "student.cl", folder)
    text = (STUDENT / "family.toml").read_text()
    old, new = manifest_edit
    if old:
        assert old in text
        text = text.replace(old, new, 1)
    (folder / "family.toml").write_text(text)
    return folder


def _refused(folder: Path) -> str:
    with pytest.raises(ManifestError) as caught:
        families.use_folders([folder])  # refused: this process's folders stay as they were
    message = str(caught.value)
    assert "\n" not in message and str(folder) in message, message
    return message


# -- 54.15: a kernel's name is a name ------------------------------------------------------

CODE_IN_NAMES = [
    "mm<REAL>;\\n#error carried\\n//",
    "matmul_naive;\\n#include </dev/zero>\\n//",
    "matmul_naive()",
    "matmul naive",
    "mm<REAL>(A)",
    "mm<REAL>>",
    'mm<\\"x\\">',
    "m\u00e9<REAL>",
]


@pytest.mark.parametrize("kernel", CODE_IN_NAMES)
def test_a_kernel_name_that_carries_code_is_refused_when_read(kernel, tmp_path):
    folder = _student(tmp_path, ('kernel = "matmul_naive"', f'kernel = "{kernel}"'))
    message = _refused(folder)
    assert "variant 'student_naive'" in message and "kernel" in message, message
    assert "an identifier" in message


@pytest.mark.parametrize("kernel", CODE_IN_NAMES[:2])
def test_a_before_launch_whose_name_carries_code_is_refused(kernel, tmp_path):
    before = f'[[variant.before]]\nkernel = "{kernel}"\ngroup = [16]\ngrid = [1]\n'
    folder = _student(tmp_path)
    manifest = folder / "family.toml"
    manifest.write_text(manifest.read_text() + before)
    message = _refused(folder)
    assert "a launch before" in message and "an identifier" in message


@pytest.mark.parametrize(
    "kernel", ["mm", "mm<REAL>", "mm<float, 16>", "mm< REAL , TILE_DIM >", "mm<ns::T, 4>"]
)
def test_a_kernel_name_with_template_arguments_is_a_name(kernel):
    from xbackend.families.values import kernel_name_problem

    assert kernel_name_problem(kernel) is None


# -- 54.5: twins that disagree on a float's width ------------------------------------------


def test_twins_that_disagree_on_a_floats_width_are_refused(catalogue):
    folder = ROUND5 / "float_twins"
    message = _refused(folder)
    for words in ("mm_scaled", "'alpha'", "scaled.cl", "scaled.cu", "float", "double"):
        assert words in message, (words, message)


def test_a_file_that_defines_real_is_refused(tmp_path, catalogue):
    """``#define REAL double`` and a ``REAL alpha`` in both twins: read as the element type
    (float), passed as 4 bytes to a kernel that reads 8 (round 5's second look); every build
    defines REAL itself, so a file that defines it otherwise is refused by name. The
    shipped kernels' ``#ifndef REAL`` guard is what the build decides, and stays."""
    folder = tmp_path / "real_macro"
    shutil.copytree(ROUND5 / "float_twins", folder)
    for name, width in (("scaled.cl", "float"), ("scaled.cu", "double")):
        path = folder / name
        text = path.read_text().replace(f"{width} alpha", "REAL alpha")
        path.write_text("#define REAL double\n" + text)
    message = _refused(folder)
    assert "it #defines REAL, which each build defines as the element type" in message
    assert families.find_variant("naive") is not None  # mm.cl's #ifndef REAL: decided


# -- 54.3: the declaration the build compiles, not one under #if 0 -------------------------


def test_a_declaration_under_if_0_does_not_replace_the_real_one(catalogue):
    from xbackend.launches.kernels import parameters, struct_fields

    families.add_folders([ROUND5 / "dead_code", ROUND5 / "dead_struct"])
    assert parameters("dead_code", "matmul_naive") == ("C", "A", "B", "hA", "wA", "wB")
    fields = struct_fields("dead_struct", "mm_mixed", "A")
    assert [name for name, _ in fields] == ["rows", "cols", "elements"]


def test_the_kernel_beside_dead_code_runs_right(catalogue):
    needs_backend("opencl")
    import xbackend

    families.add_folders([ROUND5 / "dead_code"])
    backend = xbackend.get_backend("opencl")
    try:
        for shape in (Shape(7, 13, 5), Shape(33, 20, 17)):
            A, B = make_operands(shape, SEED)
            C = backend.matmul(A, B, "dead_code_naive", 16)
            assert check(C, Reference.of(A, B)).equal, shape
    finally:
        backend.close()


def test_a_kernel_declared_otherwise_in_a_branch_the_build_decides_is_refused(catalogue):
    message = _refused(ROUND5 / "ambiguous")
    for words in ("ambiguous.cl", "kernel matmul_naive", "line 5", "line 20"):
        assert words in message, (words, message)
    assert "(C, A, B, hA, wA, wB) and (C, A, B, wA, hA, wB)" in message


@pytest.mark.parametrize("condition", ["#ifndef BLOCK_SIZE", "#if !defined(BLOCK_SIZE)"])
def test_a_conditional_on_a_macro_every_build_defines_is_decided(condition, tmp_path, catalogue):
    """Every variant's build defines BLOCK_SIZE (``build``): the declaration under
    ``#ifndef BLOCK_SIZE`` is never compiled, and the real one binds the launch."""
    from xbackend.launches.kernels import parameters

    folder = tmp_path / "ambiguous"
    shutil.copytree(ROUND5 / "ambiguous", folder)
    source = folder / "ambiguous.cl"
    source.write_text(source.read_text().replace("#ifdef OLD_ORDER", condition, 1))
    families.add_folders([folder])
    assert parameters("ambiguous", "matmul_naive") == ("C", "A", "B", "hA", "wA", "wB")


@pytest.mark.parametrize(
    ("text", "kept"),
    [("#if 0\nx\n#else\ny\n#endif", 1), ("#if 1\ny\n#else\nx\n#endif", 1),
     ("%:if 0\nx\n%:endif\ny", 1), ("#if 0\n#if 1\nx\n#endif\n#elif 1\ny\n#endif", 1),
     ("#ifdef X\ny\n#else\ny\n#endif", 2), ("#if !0\ny\n#endif", 1),
     ("#if 0 \\\n\nx\n#endif\ny", 1), ("# if 0L\nx\n#elif 0x0\nx\n#else\ny\n#endif", 1)],
)  # fmt: skip
def test_the_conditionals_decided_before_the_build(text, kept):
    """What no build compiles is blanked (no x is left); what a build may compile stays
    (each y); every line keeps its number."""
    from xbackend.families.sources import code_of

    code = code_of(text)
    assert "x" not in code and code.count("y") == kept, code
    assert code.count("\n") == text.count("\n")


# -- 54.16: an include in every spelling a compiler reads --------------------------------

SPELLINGS = [
    "digraph",
    "include_next",
    "split",
    "import",
    "split_hash",
    "has_include",
    "after_string",
]


def _including(parent: Path, spelling: str) -> Path:
    """The student's family, its .cl file headed by tests/kernels/round5/includes/<spelling>.cl."""
    folder = _student(parent)
    head = (ROUND5 / "includes" / f"{spelling}.cl").read_text()
    (folder / "student.cl").write_text(head + (STUDENT / "student.cl").read_text())
    return folder


@pytest.mark.parametrize("target", ["fifo", "/dev/zero"])
@pytest.mark.parametrize("spelling", SPELLINGS)
def test_an_include_in_any_spelling_of_a_fifo_or_a_device_is_refused(spelling, target, tmp_path):
    folder = _including(tmp_path, spelling)
    if target == "fifo":
        os.mkfifo(folder / "pipe.h")
    else:
        (folder / "pipe.h").symlink_to(target)
    message = _refused(folder)
    assert "student.cl line 2" in message and "pipe.h" in message, message


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_an_include_in_any_spelling_of_a_regular_file_is_kept(spelling, tmp_path, catalogue):
    folder = _including(tmp_path, spelling)
    (folder / "pipe.h").write_text("#define TWICE(x) (2 * (x))\n")
    families.add_folders([folder])
    assert "student_naive" in families.user_variants(["mm"])


def test_an_include_under_if_0_is_never_opened_so_not_refused(tmp_path, catalogue):
    folder = _including(tmp_path, "dead_computed")
    os.mkfifo(folder / "pipe.h")
    families.add_folders([folder])
    assert "student_naive" in families.user_variants(["mm"])


def test_a_raw_string_in_a_cuda_file_is_refused_by_name(tmp_path):
    """A C++ raw string holding ``#if 0`` (and its ``#endif`` in another): the guard took
    the include between them for dead code, and nvcc blocked on the FIFO it names until
    its deadline (round 5's second look). Refused by name, before anything opens it."""
    folder = tmp_path / "student"
    shutil.copytree(STUDENT, folder)
    head = (ROUND5 / "includes" / "raw_string.cu").read_text()
    (folder / "student.cu").write_text(head + (STUDENT / "student.cu").read_text())
    os.mkfifo(folder / "pipe.h")
    message = _refused(folder)
    assert 'student.cu line 1: a raw string literal (R"...(): xbackend checks every' in message


def test_an_include_of_a_macro_is_refused_with_the_way_round(tmp_path):
    folder = _including(tmp_path, "computed")
    os.mkfifo(folder / "pipe.h")
    message = _refused(folder)
    assert "student.cl line 3: #include 'H' names no file in quotes or <>" in message
    assert "write the file's name" in message


# -- 54.19: a launch's sizes without a usable value, said by key, value and manifest --------

NAIVE = 'description = "the student\'s naive kernel"'
LAUNCHES = {
    "a negative grid": (
        'grid = ["0 - cdiv(N, 16)", "cdiv(M, 16)"]',
        "grid x = '0 - cdiv(N, 16)' is -1 at N = 5: a launch takes 1 to 2^31 - 1 along an axis",
    ),
    "a grid past 2^64": (
        'grid = ["N * 2000000000000000000", "1"]',
        "grid x = 'N * 2000000000000000000' is 10000000000000000000 at N = 5",
    ),
    "cdiv by zero": (
        'grid = ["cdiv(N, 0)", "cdiv(M, 16)"]',
        "grid x: 'cdiv(N, 0)': division by zero at N = 5",
    ),
    "an uneven division": (
        'grid = ["N / 3", "M"]',
        "grid x: 'N / 3': 5 / 3 is not a whole number at N = 5",
    ),
    "an argument divided by zero": (
        'grid = ["N", "M"]\narguments = { hA = "M", wA = "K", wB = "N / (M - 7)" }',
        "arguments.wB: 'N / (M - 7)': division by zero at M = 7, N = 5",
    ),
}


def _planned(tmp_path: Path, extra: str, device=None):
    from xbackend.launches.element import plan_element

    folder = _student(tmp_path, (NAIVE, f"{NAIVE}\ngroup = [16, 16]\n{extra}"))
    families.add_folders([folder])
    spec = families.find_variant("student_naive")
    A, B = make_operands(Shape(7, 13, 5), SEED)
    return folder, lambda: plan_element("mm", spec, A, B, 16, device=device)


@pytest.mark.parametrize("case", LAUNCHES, ids=str)
def test_a_launch_size_without_a_usable_value_names_key_value_and_manifest(
    case, tmp_path, catalogue
):
    from xbackend.errors import UnsupportedParameter

    extra, words = LAUNCHES[case]
    folder, plan = _planned(tmp_path, extra)
    with pytest.raises(UnsupportedParameter) as raised:
        plan()
    said = str(raised.value)
    assert said.startswith(f"{folder / 'family.toml'}: variant 'student_naive': "), said
    assert words in said, said


def test_a_negative_group_is_not_run_with_the_axis_and_its_value(tmp_path):
    from xbackend.families.manifest import load
    from xbackend.launches.element import group_problem
    from xbackend.launches.specs import DeviceInfo

    folder = _student(
        tmp_path, (NAIVE, f'{NAIVE}\ngroup = ["0 - TILE", "0 - TILE"]\ngrid = ["N", "M"]')
    )
    spec = dict((s.name, s) for _, s in load(folder).variants)["student_naive"]
    device = DeviceInfo("a CPU", max_work_group_size=1024, local_mem_bytes=32768)
    said = group_problem(device, spec, 16, 4, ("work-items", "local"))
    assert said == (
        "tile 16: group x = '0 - TILE' is -16 work-items: a group has at least one "
        f"({folder / 'family.toml'})"
    )


def test_a_staged_size_without_a_value_is_not_run_with_its_key(tmp_path):
    from xbackend.families.manifest import load
    from xbackend.launches.element import group_problem
    from xbackend.launches.specs import DeviceInfo

    folder = _student(tmp_path, ('staged = "2 * TILE * TILE"', 'staged = "2 * TILE / (TILE - 16)"'))
    spec = dict((s.name, s) for _, s in load(folder).variants)["student_tiled"]
    device = DeviceInfo("a CPU", max_work_group_size=1024, local_mem_bytes=32768)
    said = group_problem(device, spec, 16, 4, ("work-items", "local"))
    assert said == (
        f"tile 16: staged: '2 * TILE / (TILE - 16)': division by zero ({folder / 'family.toml'})"
    )


# -- 54.20: a workspace's size ------------------------------------------------------------

WORKSPACES = {
    "negative": (
        '"0 - K * N"',
        None,
        "workspaces.T = '0 - K * N' is -65 elements at K = 13, N = 5: a workspace holds at "
        "least one",
    ),
    "zero": (
        '"K - K"',
        None,
        "workspaces.T = 'K - K' is 0 elements at K = 13: a workspace holds at least one",
    ),
    "past the device": (
        '"K * N * 1000000000000000"',
        8 << 30,
        "workspaces.T = 'K * N * 1000000000000000' is 65000000000000000 elements (2.42e+08 "
        "GiB) at K = 13, N = 5: more than the device's 8 GiB in one buffer",
    ),
    "past any device": (
        '"K * N * 1000000000000000000"',
        None,
        "more than any device in one buffer",
    ),
}


@pytest.mark.parametrize("case", WORKSPACES, ids=str)
def test_a_workspace_without_a_usable_size_is_refused_by_key(case, tmp_path, catalogue):
    from xbackend.errors import UnsupportedParameter
    from xbackend.launches.specs import DeviceInfo

    size, memory, words = WORKSPACES[case]
    device = DeviceInfo("a GPU", global_mem_bytes=memory) if memory else None
    folder, plan = _planned(tmp_path, f'grid = ["N", "M"]\nworkspaces = {{ T = {size} }}', device)
    with pytest.raises(UnsupportedParameter) as raised:
        plan()
    said = str(raised.value)
    assert said.startswith(f"{folder / 'family.toml'}: variant 'student_naive': "), said
    assert words in said, said


@pytest.mark.parametrize(
    ("extra", "words"),
    [('grid = ["N", "M"]\nworkspaces = { T = 0 }', "workspaces.T = 0: a workspace holds at"),
     ('grid = ["N", "M"]\nworkspaces = { T = -3 }', "workspaces.T = -3: a workspace holds"),
     ('grid = [-1, "M"]', "grid: -1 along an axis: a launch takes at least 1")],
)  # fmt: skip
def test_a_size_that_is_a_number_is_judged_when_the_manifest_is_read(extra, words, tmp_path):
    folder = _student(tmp_path, (NAIVE, f"{NAIVE}\ngroup = [16, 16]\n{extra}"))
    message = _refused(folder)
    assert "variant 'student_naive'" in message and words in message, message


def test_a_workspace_of_a_usable_size_is_planned_in_bytes(tmp_path, catalogue):
    from xbackend.launches.specs import DeviceInfo

    device = DeviceInfo("a GPU", global_mem_bytes=8 << 30)
    _, plan = _planned(tmp_path, 'grid = ["N", "M"]\nworkspaces = { T = "K * N" }', device)
    assert plan().workspaces == {"T": 5 * 13 * 4}


# -- 54.8: XBACKEND_KERNELS replaces a --kernels family's file too ------------------------


def _replacing(tmp_path: Path, monkeypatch) -> Path:
    """The student's family added, and an XBACKEND_KERNELS folder whose opencl/student.cl
    is the student's with the naive kernel's sum started at 1 (an edit to try)."""
    families.add_folders([_student(tmp_path)])
    edited = tmp_path / "edited" / "opencl" / "student.cl"
    edited.parent.mkdir(parents=True)
    text = (STUDENT / "student.cl").read_text()
    edited.write_text(text.replace("float sum = 0.0f;", "float sum = 1.0f;", 1))
    monkeypatch.setenv("XBACKEND_KERNELS", str(tmp_path / "edited"))
    return edited


def test_xbackend_kernels_replaces_a_users_family_file(tmp_path, monkeypatch, catalogue):
    from xbackend.launches.kernels import read_kernel, source_path

    edited = _replacing(tmp_path, monkeypatch)
    assert source_path("student", "opencl") == edited
    assert "float sum = 1.0f;" in read_kernel("student", "opencl")[1]


def test_the_replaced_users_kernel_is_the_one_run(tmp_path, monkeypatch, catalogue):
    needs_backend("opencl")
    import xbackend

    _replacing(tmp_path, monkeypatch)
    backend = xbackend.get_backend("opencl")
    try:
        A, B = make_operands(Shape(7, 13, 5), SEED)
        C = backend.matmul(A, B, "student_naive", 16)
        assert not check(C, Reference.of(A, B)).equal  # the edit's sum, started at 1
        assert check(C - 1, Reference.of(A, B)).equal
    finally:
        backend.close()


def test_a_users_file_named_as_a_support_kernel_stays_the_users(tmp_path, monkeypatch, catalogue):
    """Without XBACKEND_KERNELS, kernels/opencl/ceilings.cl replaces no family's file."""
    from xbackend.launches.kernels import source_path

    monkeypatch.delenv("XBACKEND_KERNELS", raising=False)
    folder = _student(tmp_path)
    (folder / "student.cl").rename(folder / "ceilings.cl")
    families.add_folders([folder])
    assert source_path("student", "opencl") == folder / "ceilings.cl"


def test_a_replacement_files_includes_are_checked(tmp_path, monkeypatch, catalogue):
    from xbackend.errors import XBackendError
    from xbackend.launches.kernels import read_kernel

    edited = _replacing(tmp_path, monkeypatch)
    head = (ROUND5 / "includes" / "digraph.cl").read_text()
    edited.write_text(head + edited.read_text())
    os.mkfifo(edited.parent / "pipe.h")
    with pytest.raises(XBackendError, match=r"student\.cl line 2: #include 'pipe\.h'"):
        read_kernel("student", "opencl")


# -- 54.4: a struct argument under #pragma pack ------------------------------------------


def _packed_launch():
    from xbackend.launches.element import plan_element

    spec = families.find_variant("packed_naive")
    A, B = make_operands(Shape(7, 13, 5), SEED)
    return plan_element("mm", spec, A, B, spec.default_tile).launches[0]


def test_a_struct_under_pragma_pack_is_laid_out_as_packed(catalogue):
    """pack(push, 4): scale at 4, elements at 12, 20 bytes, 4-aligned (natural: 8, 16, 24)."""
    import struct

    from xbackend.launches.launch import Buffer, Record

    families.add_folders([ROUND5 / "packed"])
    A = _packed_launch().args["A"]
    assert isinstance(A, Record) and A.pragma_pack == 4
    assert (A.size, A.alignment) == (20, 4)
    data = A.pack(lambda buffer: {"A": 0x1122334455667788}[buffer.name])
    assert struct.unpack_from("<i", data, 0)[0] == 7  # rows = M
    assert struct.unpack_from("<d", data, 4)[0] == 1.0  # scale
    assert struct.unpack_from("<Q", data, 12)[0] == 0x1122334455667788  # elements
    natural = Record(A.fields)
    assert (natural.size, natural.alignment) == (24, 8) and A.fields[2][2] == Buffer("A")


@pytest.mark.skipif(not NVCC, reason="nvcc is not installed")
def test_a_packed_struct_is_packed_as_nvcc_lays_it_out(catalogue, tmp_path):
    """Each argument's size and alignment in xbackend's packing is what nvcc's PTX says."""
    from test_styles import _ptx_parameters

    from xbackend.launches.kernels import cuda_text, read_kernel
    from xbackend.launches.launch import Record

    families.add_folders([ROUND5 / "packed"])
    launch = _packed_launch()
    text, _ = cuda_text(read_kernel("packed", "cuda")[1])
    (params,) = _ptx_parameters(f'extern "C" {{\n{text}\n}}', tmp_path, []).values()
    records = [value for value in launch.values() if isinstance(value, Record)]
    assert [(r.alignment, r.size) for r in records] == params[:3] == [(4, 20)] * 3


def test_a_struct_aligned_by_an_attribute_is_refused_by_name(catalogue):
    message = _refused(ROUND5 / "attributed")
    assert "parameter 'A' of mm_packed" in message and "struct Scaled" in message
    assert "#pragma pack(N)" in message


@pytest.mark.parametrize(
    ("pragma", "words"),
    [("#pragma pack(show)", "line 4: #pragma pack(show): xbackend lays out struct arguments"),
     ("#pragma pack(push, r1, 4)", "line 4: #pragma pack(push, r1, 4)"),
     ("#pragma pack(3)", "line 4: #pragma pack of 3"),
     ('_Pragma("pack(push, 4)")', "line 4: _Pragma(...): xbackend reads a struct's layout")],
)  # fmt: skip
def test_a_pack_xbackend_does_not_follow_is_refused_by_name(pragma, words, tmp_path):
    folder = tmp_path / "packed"
    shutil.copytree(ROUND5 / "packed", folder)
    source = folder / "packed.cu"
    text = source.read_text().replace("\n#pragma pack(push, 4)\n", f"\n{pragma}\n", 1)
    source.write_text(text)
    message = _refused(folder)
    assert "packed.cu" in message and words in message, message


def test_a_pack_in_an_included_header_is_refused_by_name(tmp_path):
    """``#pragma pack(push, 4)`` in a header the kernel file includes: nvcc packs the struct
    after the include (20 bytes), xbackend read the file alone (24): round 5's second look.
    Refused by name, with where to write the pragma."""
    folder = tmp_path / "packed"
    shutil.copytree(ROUND5 / "packed", folder)
    shutil.copy(ROUND5 / "includes" / "pack4.h", folder / "pack4.h")
    source = folder / "packed.cu"
    text = source.read_text().replace("\n#pragma pack(push, 4)\n", "\n", 1)
    source.write_text('#include "pack4.h"\n' + text)
    message = _refused(folder)
    assert "packed.cu line 1: #include 'pack4.h': it holds a #pragma pack" in message, message
    assert "write the pragma in the kernel file" in message


PATHOLOGICAL = {
    "packs": "#pragma pack(push, 4)\n",
    "packed structs": "#pragma pack(2)\nstruct S { int a; };\n",
    "nested ifs": "#if 1\n",
    "dead ifs": "#if 0\n",
    "spliced lines": "x \\\n",
    "includes": '#include "a.h"\n',
}


@pytest.mark.parametrize("case", PATHOLOGICAL, ids=str)
def test_a_megabyte_of_directives_is_read_within_seconds(case, tmp_path):
    """A bound on a pathological case, not a comparison of timings."""
    import time

    from xbackend.families.sources import check_includes, declarations_of

    unit = PATHOLOGICAL[case]
    text = unit * ((1 << 20) // len(unit))
    (tmp_path / "a.h").write_text("\n")
    started = time.perf_counter()
    declarations_of(text)
    check_includes(tmp_path / "k.cl", text, [tmp_path])
    assert time.perf_counter() - started < 5.0, case


def test_a_replacement_declaring_a_kernel_twice_otherwise_is_refused_naming_it(
    tmp_path, monkeypatch, catalogue
):
    from xbackend.errors import XBackendError
    from xbackend.launches.kernels import parameters

    edited = _replacing(tmp_path, monkeypatch)
    shutil.copy(ROUND5 / "ambiguous" / "ambiguous.cl", edited)
    with pytest.raises(XBackendError) as raised:
        parameters("student", "matmul_naive")
    assert str(raised.value).startswith(f"{edited}: kernel matmul_naive is declared at line 5")


@pytest.mark.parametrize(
    "text",
    ["#ifdef X\ny\n#else\nx\n#endif", "#ifndef X\nx\n#else\ny\n#endif",
     "#if defined(X)\ny\n#elif 1\nx\n#endif", "#if !defined X\nx\n#endif\ny",
     "#ifdef Z\ny\n#elifdef X\ny\n#else\nx\n#endif"],
)  # fmt: skip
def test_a_conditional_on_a_macro_every_build_defines_is_decided_as_the_build_does(text):
    from xbackend.families.sources import code_of

    code = code_of(text, frozenset({"X"}))
    assert "x" not in code and "y" in code, code
    assert "x" in code_of(text)  # a macro no build is known to define keeps its branches
    assert "x" in code_of(f"#undef X\n{text}", frozenset({"X"}))  # nor one the file undoes


# -- issue 55: read_again reads the kernels' declarations again ----------------------------


def test_read_again_binds_a_reordered_kernels_parameters_anew(tmp_path, catalogue):
    from xbackend.launches.kernels import parameters

    folder = _student(tmp_path)
    families.add_folders([folder])
    assert parameters("student", "matmul_naive") == ("C", "A", "B", "hA", "wA", "wB")
    source = folder / "student.cl"
    source.write_text(
        source.read_text().replace("int hA, int wA, int wB", "int wB, int wA, int hA")
    )
    families.read_again()
    assert parameters("student", "matmul_naive") == ("C", "A", "B", "wB", "wA", "hA")
