"""Kernel files: twins match, every file compiles, and every file ships in the wheel."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import xbackend
from xbackend.errors import KernelCompileError

ROOT = Path(__file__).resolve().parent.parent
# Every kernel file: the families' (kernels/<family>/) and the support kernels'
# (kernels/cuda/, kernels/opencl/).
CUDA = sorted((ROOT / "kernels").glob("*/*.cu"), key=lambda p: p.stem)
OPENCL_FILES = sorted((ROOT / "kernels").glob("*/*.cl"), key=lambda p: p.stem)
# CUDA files with no twin, and why: hold.cu gates CUDA's event timing, and OpenCL's
# profiling counters time each command without such help.
CUDA_ONLY = {"hold"}
# OpenCL files with no twin: probe.cl tries XBACKEND_OPENCL_OPTIONS, which CUDA does not take.
OPENCL_ONLY = {"probe"}
OPENCL = [p for p in OPENCL_FILES if p.stem not in OPENCL_ONLY]  # the twins of CUDA's files
TILES = (8, 16, 32)


def _kernel_names(path: Path) -> list[str]:
    return re.findall(r"^void\s+(\w+)\s*\(", path.read_text(), flags=re.MULTILINE)


def test_every_cuda_kernel_has_an_opencl_twin():
    assert CUDA, "no CUDA kernels found"
    twinned = [p for p in CUDA if p.stem not in CUDA_ONLY]
    assert [p.stem for p in twinned] == [p.stem for p in OPENCL]
    assert {p.stem for p in CUDA} >= CUDA_ONLY, "a CUDA-only file named here is gone"
    for cu, cl in zip(twinned, OPENCL, strict=True):
        assert _kernel_names(cu) == _kernel_names(cl) != []


def _parameters(path: Path) -> dict[str, tuple[str, ...]]:
    """Each kernel's parameter names, as its file declares them (the clock's hooks aside:
    a build without STAMP has none of them)."""
    from xbackend.launches.kernels import without_stamps

    kernel = r'^(?:extern "C" __global__ )?void\s+(\w+)\s*\(([^)]*)\)'
    found = re.findall(kernel, without_stamps(path.read_text()), flags=re.MULTILINE)
    return {
        name: tuple(re.findall(r"(\w+)\s*$", param)[0] for param in params.split(","))
        for name, params in found
    }


@pytest.mark.parametrize("path", CUDA + OPENCL_FILES, ids=lambda p: p.name)
def test_launches_name_the_parameters_the_kernels_declare(path):
    """Launches give their arguments by name, ordered by ``kernels.parameters``, which reads
    the OpenCL twin: every file must declare the same, CUDA's included."""
    from xbackend.launches.kernels import parameters

    declared = _parameters(path)
    assert declared
    for kernel, names in declared.items():
        assert parameters(path.stem, kernel) == names, kernel


def test_a_launch_missing_an_argument_is_named():
    from xbackend.errors import XBackendError
    from xbackend.launches.launch import KernelLaunch

    with pytest.raises(XBackendError, match="mm_naive needs the arguments ldc"):
        KernelLaunch.of("mm_naive", "mm", (), (1, 1, 1), (1, 1, 1), A=0, B=0, C=0, M=1, N=1,
                        K=1, lda=1, ldb=1, strideA=0, strideB=0, strideC=0)  # fmt: skip


# The API words of each language, mapped to common ones: what is left must be the same.
_CUDA_WORDS = [
    # mm_warp's DYNAMIC_SHARED: slabs sized at launch, which OpenCL refuses (#error).
    (r"extern __shared__ __align__\(16\) REAL slabs\[\];", "LAUNCH_SIZED_SLABS"),
    (r'extern "C" __global__ __launch_bounds__\([^()]*(\([^()]*\))?[^()]*\)', "KERNEL"),
    (r'extern "C" __global__', "KERNEL"),
    (r"__device__ __forceinline__", "inline"),
    (r"__shared__ __align__\(16\) (\w+) (\w+\[[^\]]*\]);", r"SHARED \1 \2;"),
    (r"__shared__", "SHARED"),
    (r"__restrict__", "restrict"),
    (r"__syncthreads\(\)", "BARRIER"),
    (r"blockIdx\.([xyz])", r"GROUP_\1"),
    (r"threadIdx\.([xyz])", r"LOCAL_\1"),
    (r"gridDim\.([xyz])", r"GROUPS_\1"),
    (r"\blong long\b", "long"),  # the wide INDEX: 64 bits in both languages
    # Where cp.async is there, and a shared address for its PTX (mm_warp's ASYNC).
    (r"#if __CUDA_ARCH__ >= 800", "#if CP_ASYNC_THERE"),
    (r"#define SHARED_ADDRESS\(p\) .*", "#define SHARED_ADDRESS(p) ADDRESS"),
]
_OPENCL_WORDS = [
    (r"#ifdef XB_FP64\s*#pragma OPENCL EXTENSION cl_khr_fp64 : enable\s*#endif", ""),
    (r"__kernel __attribute__\(\(reqd_work_group_size\([^()]*\)\)\)", "KERNEL"),
    (r"__kernel", "KERNEL"),
    (r"__local (\w+) (\w+\[[^\]]*\]) __attribute__\(\(aligned\(16\)\)\);", r"SHARED \1 \2;"),
    (r"__local (?=\w+ \w+\[)", "SHARED "),
    (r"__global |__local |__private ", ""),
    (r"barrier\(CLK_LOCAL_MEM_FENCE\)", "BARRIER"),
    (r"get_group_id\((\d)\)", lambda m: "GROUP_" + "xyz"[int(m.group(1))]),
    (r"get_local_id\((\d)\)", lambda m: "LOCAL_" + "xyz"[int(m.group(1))]),
    (r"get_num_groups\((\d)\)", lambda m: "GROUPS_" + "xyz"[int(m.group(1))]),
    (r"#if defined\(XB_PTX\) && XB_PTX >= 80", "#if CP_ASYNC_THERE"),
    (r"#define SHARED_ADDRESS\(p\) .*", "#define SHARED_ADDRESS(p) ADDRESS"),
    (r'#error "DYNAMIC_SHARED is CUDA\'s[^"]*"', "LAUNCH_SIZED_SLABS"),
]


def _code(text: str, words) -> str:
    """A kernel file's code without comments, in common words, whitespace collapsed."""
    text = re.sub(r"/\*.*?\*/", "", re.sub(r"//[^\n]*", "", text), flags=re.DOTALL)
    for pattern, replacement in words:
        text = re.sub(pattern, replacement, text)
    return re.sub(r"\s+", " ", text).strip()


def _twin(cu: Path) -> Path:
    """A CUDA file's OpenCL twin: beside it in its family's folder, or in kernels/opencl."""
    beside = cu.with_suffix(".cl")
    return beside if beside.exists() else cu.parent.parent / "opencl" / f"{cu.stem}.cl"


@pytest.mark.parametrize("cu", [p for p in CUDA if p.stem not in CUDA_ONLY], ids=lambda p: p.stem)
def test_twins_are_the_same_code_in_both_languages(cu):
    """The OpenCL file is the CUDA one in OpenCL's words, comments and layout aside."""
    cl = _twin(cu)
    cuda, opencl = _code(cu.read_text(), _CUDA_WORDS), _code(cl.read_text(), _OPENCL_WORDS)
    if cuda != opencl:
        at = next(i for i, (a, b) in enumerate(zip(cuda, opencl, strict=False)) if a != b)
        pytest.fail(f"{cu.name} and {cl.name} differ at\n{cuda[at - 80 : at + 80]}\n"
                    f"{opencl[at - 80 : at + 80]}")  # fmt: skip
    # The comparison can fail: one changed operator in the twin is seen.
    changed = cl.read_text().replace("+=", "*=", 1)
    assert changed != cl.read_text() and _code(changed, _OPENCL_WORDS) != cuda


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
@pytest.mark.parametrize("index", ["", "-DWIDE_INDEX"], ids=["int", "wide"])
@pytest.mark.parametrize("tile", TILES)
@pytest.mark.parametrize("path", CUDA, ids=lambda p: p.name)
def test_cuda_kernel_compiles_with_nvcc(path, tile, index, tmp_path):
    """Every file, in the default build and in the wide one (64-bit offsets)."""
    done = subprocess.run(
        ["nvcc", "-ptx", "-arch=sm_90", f"-DTILE={tile}", *index.split(), "-I",
         str(ROOT / "kernels" / "cuda"), str(path),
         "-o", str(tmp_path / "k")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("tile", TILES)
def test_opencl_kernels_build_on_the_device(backend, tile):
    if backend.name not in ("opencl", "cuda"):
        pytest.skip("compiled backends only")
    import numpy as np

    A = np.ones((3, 2), np.float32)
    for variant in backend.runnable_variants():
        spec = backend.variant_spec(variant)
        if spec.takes_tile and backend.tile_problem(variant, tile) is None:
            assert backend.matmul(A, A.T.copy(), variant=variant, tile=tile)[0, 0] == 2.0


def test_compile_error_shows_source_options_and_device(backend, monkeypatch):
    if backend.name not in ("opencl", "cuda"):
        pytest.skip("compiled backends only")
    module = sys.modules[type(backend).__module__]
    path = ROOT / "kernels" / "broken"
    monkeypatch.setattr(module, "read_kernel", lambda *_: (path, "this is not C;\n"))
    for cache in (
        ("_programs", "_kernels") if backend.name == "opencl" else ("_modules", "_functions")
    ):
        monkeypatch.setattr(backend, cache, {})
    import numpy as np

    A = np.ones((2, 2), np.float32)
    with pytest.raises(KernelCompileError) as caught:
        backend.matmul(A, A, variant="tiled", tile=8)
    message = str(caught.value)
    assert "   1 | this is not C;" in message
    assert "-DTILE=8" in message and backend.device.name in message
    assert caught.value.__cause__ is not None
    monkeypatch.undo()  # the real kernels again: the backend must still work
    assert backend.matmul(A, A, variant="tiled", tile=8)[0, 0] == 2.0


@pytest.mark.slow
def test_kernels_ship_in_a_non_editable_install(tmp_path):
    """Build the wheel, install it elsewhere, and load every kernel file from there."""
    wheel_dir, target = tmp_path / "wheel", tmp_path / "site"

    def pip(*args: str) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "pip", *args, "-q", "--no-deps"],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr

    pip("wheel", "--no-build-isolation", "-w", str(wheel_dir), str(ROOT))
    wheel = next(wheel_dir.glob("xbackend-*.whl"))
    pip("install", "--target", str(target), str(wheel))
    code = (
        "import xbackend, pathlib\n"
        "from xbackend.launches.kernels import read_kernel\n"
        "root = xbackend.kernels_path()\n"
        "print(root)\n"
        "for path in sorted(root.rglob('*.c[lu]')):\n"
        "    language = {'.cu': 'cuda', '.cl': 'opencl'}[path.suffix]\n"
        "    _, text = read_kernel(path.stem, language)\n"
        "    print(path.relative_to(root), len(text))\n"
        "for path in sorted([*root.rglob('*.h'), *root.rglob('family.toml')]):\n"
        "    print(path.relative_to(root), len(path.read_text()))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert Path(lines[0]).is_relative_to(target), "kernels did not come from the install"
    shipped = {line.split()[0]: int(line.split()[1]) for line in lines[1:]}
    expected = {
        str(p.relative_to(ROOT / "kernels")): len(p.read_text())
        for p in CUDA
        + OPENCL_FILES
        + sorted([*(ROOT / "kernels").glob("*/*.h"), *(ROOT / "kernels").glob("*/family.toml")])
    }
    assert shipped == expected
    assert xbackend.__version__ in wheel.name
