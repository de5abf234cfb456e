"""Issue 40: any kernel in. The families of examples/styles/ are kernels written in the
styles people bring (a CUDA-only and an OpenCL-only folder, a template, a struct argument,
``size_t`` sizes, a batch count, rectangular groups, several outputs per worker, B
transposed, column-major operands, a ``WIDTH`` define, two launches, SGEMM's scalars),
each expressed by its manifest alone. Each runs right on every backend of its languages
here, at shapes its rules take; what is packed for CUDA is what nvcc's PTX expects; a
family's own parameters are a space ``tune`` searches.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import xbackend
from xbackend import families
from xbackend.families.manifest import ManifestError, load
from xbackend.launches.element import fitted, plan_element
from xbackend.operations import Shape, make_operands, operation
from xbackend.problems import Reference, check
from xbackend.pytest_plugin import needs_backend

STYLES = Path(__file__).resolve().parent.parent / "examples" / "styles"
ABI = Path(__file__).resolve().parent / "kernels" / "abi"
SEED = 20261127
EDGES = (Shape(16, 14, 16), Shape(7, 13, 5), Shape(33, 20, 17), Shape(1, 1, 1))
LANGUAGE = {"opencl": "opencl", "cuda": "cuda"}


def test_mixed_arguments_run_right_on_cuda(own_families):
    """The kernel whose arguments C pads between, on a GPU: each lands where it reads it."""
    needs_backend("cuda")
    families.add_folders([ABI / "mixed_args"])
    backend = xbackend.get_backend("cuda")
    try:
        for shape in EDGES:
            A, B = make_operands(shape, SEED)
            C = backend.measure(A, B, "mixed_args_naive", warmup=0, samples=0).result
            assert check(C, Reference.of(A, B)).equal, shape
    finally:
        backend.close()


def _cases() -> list[tuple[str, str, str, str]]:
    """(folder, op, variant, backend) for every variant of every style, on each backend
    of its family's languages."""
    found: list[tuple[str, str, str, str]] = []
    for manifest in sorted(STYLES.glob("*/family.toml")):
        family = load(manifest.parent)
        for op, spec in family.variants:
            for backend in ("opencl", "cuda"):
                if backend in family.sources:
                    found.append((manifest.parent.name, op, spec.name, backend))
    return found


@pytest.fixture
def catalogue(own_families):
    def add(name: str) -> None:
        families.add_folders([STYLES / name])

    return add


def _operands(op: str, shape: Shape, dtype: str = "float32") -> tuple[np.ndarray, np.ndarray]:
    if operation(op).batched:  # three products of the shape
        pairs = [make_operands(shape, SEED + n, np.dtype(dtype)) for n in range(3)]
        return np.stack([a for a, _ in pairs]), np.stack([b for _, b in pairs])
    return make_operands(shape, SEED, np.dtype(dtype))


@pytest.mark.parametrize(("folder", "op", "variant", "backend_name"), _cases())
def test_every_style_is_right_at_the_edges(folder, op, variant, backend_name, catalogue):
    needs_backend(backend_name)
    catalogue(folder)
    spec = families.find_variant(variant)
    backend = xbackend.get_backend(backend_name)
    try:
        for dtype in spec.dtypes or ("float32",):
            for shape in EDGES:
                sizes = fitted(spec, shape.M, shape.N, shape.K)
                assert sizes is not None, (variant, shape)
                taken = Shape(M=sizes[0], K=sizes[2], N=sizes[1])
                A, B = _operands(op, taken, dtype)
                # measure poisons C (NaN) first: an element left unwritten fails the check
                C = backend.measure(A, B, variant, op=op, warmup=0, samples=0).result
                found = check(C, Reference.of(A, B, op))
                assert found.equal, (variant, dtype, taken, found)
    finally:
        backend.close()


def test_a_kernel_of_square_products_is_checked_at_squares():
    family = load(STYLES / "width_define")
    specs = {spec.name: spec for _, spec in family.variants}
    assert fitted(specs["width_define_naive"], 7, 5, 13) == (7, 7, 7)
    # K a multiple of its tile: the nearest K that is, the rest kept
    tile = (
        specs["width_define_kmultiple"].defaults.get("TS")
        or specs["width_define_kmultiple"].default_tile
    )
    fit = fitted(specs["width_define_kmultiple"], 7, 5, 13)
    assert fit is not None and tile is not None
    _, _, K = fit
    assert K % tile == 0 and K >= 13


def test_a_shape_a_kernel_does_not_take_is_refused_with_its_rule(catalogue):
    catalogue("width_define")
    spec = families.find_variant("width_define_naive")
    A, B = make_operands(Shape(7, 13, 5), SEED)
    with pytest.raises(
        xbackend.UnsupportedParameter, match=r"M == N does not hold \(M = 7, N = 5\)"
    ):
        plan_element("mm", spec, A, B, spec.default_tile)


def test_a_column_major_result_is_read_back_as_the_product(catalogue):
    """The plan of the column-major family: A and B uploaded transposed, their leading
    dimensions their rows, C stored N×M and turned back as it is read."""
    catalogue("column_major")
    spec = families.find_variant("column_major_naive")
    A, B = make_operands(Shape(7, 13, 5), SEED)
    product = plan_element("mm", spec, A, B, spec.default_tile)
    assert np.array_equal(product.inputs["A"].reshape(13, 7), A.T)
    assert np.array_equal(product.inputs["B"].reshape(5, 13), B.T)
    assert product.output_shape == (5, 7) and product.output_turned


def test_two_launches_share_their_workspace(catalogue):
    catalogue("two_launch")
    spec = families.find_variant("two_launch_rows")
    A, B = make_operands(Shape(7, 13, 5), SEED)
    product = plan_element("mm", spec, A, B, spec.default_tile)
    first, second = product.launches
    assert [first.function, second.function] == ["transpose_b", "mm_rows"]
    assert product.workspaces == {"BT": 13 * 5 * 4}
    assert {v.name for v in first.args.values() if hasattr(v, "name")} == {"B", "BT"}
    assert {v.name for v in second.args.values() if hasattr(v, "name")} == {"A", "BT", "C"}


# -- CUDA's packing, against nvcc's own word (no GPU needed) ---------------------------------

NVCC = shutil.which("nvcc") or (
    "/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").is_file() else ""
)


def _ptx_parameters(
    source: str, tmp_path: Path, options: list[str]
) -> dict[str, list[tuple[int, int]]]:
    """Each entry of nvcc's PTX with its parameters' (alignment, bytes)."""
    path = tmp_path / "k.cu"
    path.write_text(source)
    ptx = subprocess.run([NVCC, "-ptx", "-arch=sm_90", *options, str(path), "-o", "-"],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    found = {}
    for name, body in re.findall(r"\.entry (\w+)\(\s*(.*?)\)", ptx, re.DOTALL):
        params = []
        for line in body.split(","):
            array = re.search(r"\.align (\d+) \.b8 \w+\[(\d+)\]", line)
            scalar = re.search(r"\.param \.([usfb])(\d+) ", line)
            if array:
                params.append((int(array[1]), int(array[2])))
            elif scalar:
                params.append((int(scalar[2]) // 8, int(scalar[2]) // 8))
        found[name] = params
    return found


@pytest.mark.skipif(not NVCC, reason="nvcc is not installed")
@pytest.mark.parametrize(
    ("folder", "variant"),
    [(STYLES / "struct_arg", "struct_arg_tiled"), (ABI / "mixed_args", "mixed_args_naive")],
    ids=["struct_arg", "mixed_args"],
)
def test_a_struct_is_packed_as_nvcc_lays_it_out(folder, variant, own_families, tmp_path):
    """Each argument's offset in xbackend's packing is the offset nvcc's PTX gives it."""
    import struct

    from xbackend.launches.kernels import cuda_text, read_kernel
    from xbackend.launches.launch import packing

    families.add_folders([folder])
    spec = families.find_variant(variant)
    A, B = make_operands(Shape(7, 13, 5), SEED)
    launch = plan_element("mm", spec, A, B, spec.default_tile).launches[0]
    text, _ = cuda_text(read_kernel(spec.family, "cuda")[1])
    options = [o for o in launch.options]
    (params,) = _ptx_parameters(f'extern "C" {{\n{text}\n}}', tmp_path, options).values()
    expected, offset = [], 0
    for align, size in params:
        offset += -offset % align
        expected.append(offset)
        offset += size
    codes = packing(launch.values())
    assert struct.calcsize(codes) == offset, (codes, params)
    # each struct's bytes start where nvcc puts them
    starts, position = [], 0
    for piece in re.findall(r"(\d*)([a-zA-Z])", codes):
        count, code = int(piece[0] or 1), piece[1]
        if code == "x":
            position += count
            continue
        position += -position % (1 if code == "s" else struct.calcsize(code))
        starts.append(position)
        position += count if code == "s" else struct.calcsize(code)
    assert starts == expected


@pytest.mark.skipif(not NVCC, reason="nvcc is not installed")
def test_a_template_instance_is_found_by_its_name(catalogue, tmp_path):
    from xbackend.backends.cubins import entry
    from xbackend.launches.kernels import cuda_text, instances, read_kernel

    catalogue("template")
    named = instances("template", "float64")
    assert named and all("<double>" in name for name in named)
    text, as_it_is = cuda_text(read_kernel("template", "cuda")[1], named)
    assert as_it_is  # a template cannot have C linkage: the file goes as it is
    path = tmp_path / "t.cu"
    path.write_text(text)
    subprocess.run([NVCC, "-cubin", "-arch=sm_90", "-DTILE_DIM=16", str(path), "-o",
                    str(tmp_path / "t.cubin")], check=True, capture_output=True)  # fmt: skip
    cubin = (tmp_path / "t.cubin").read_bytes()
    for name in named:
        symbol = entry(cubin, name)
        assert symbol.startswith(f"_Z{len(name.split('<')[0])}{name.split('<')[0]}Id")
    with pytest.raises(xbackend.XBackendError, match="holds no kernel"):
        entry(cubin, named[0].replace("double", "int"))


# -- a family's own tuning space ----------------------------------------------------------


def test_a_family_declares_its_tuning_space():
    family = load(STYLES / "outputs_per_thread")
    spec = next(spec for _, spec in family.variants if spec.name == "outputs_global")
    space = list(spec.space())
    sizes = [len(values) for _, values in spec.parameters]
    assert len(space) == int(np.prod(sizes)) > 1
    assert all(set(config) == {name for name, _ in spec.parameters} for config in space)
    assert spec.configuration(None) == dict(spec.defaults)


def test_tune_searches_a_familys_space_and_runs_its_choice(catalogue, tmp_path, monkeypatch):
    """``tune`` times every configuration the device runs, checks each result, caches its
    choice; a later run of the variant takes that choice."""
    needs_backend("opencl")
    from xbackend import tuning
    from xbackend.tuning.cache import CACHE_ENV

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "tuned.json"))
    catalogue("outputs_per_thread")
    backend = xbackend.get_backend("opencl")
    try:
        (result,) = tuning.tune(
            backend, ["outputs_global"], [Shape(64, 64, 64)], np.dtype("float32"),
            samples=2, finalist_time_s=0, how="exhaustive", progress=lambda _: None,
        )  # fmt: skip
        spec = backend.variant_spec("outputs_global")
        timed = [trial for trial in result.trials if trial.tflops]
        assert len(timed) == len(result.trials) > 1  # every one ran and was equal
        assert result.chosen is not None
        chosen = result.chosen.config.to_dict()
        assert set(chosen) == {name for name, _ in spec.parameters}
        backend.use_choices(tuning.cached_choices())
        A, B = make_operands(Shape(64, 64, 64), SEED)
        measured = backend.measure(A, B, "outputs_global", warmup=0, samples=0)
        assert measured.params == chosen
    finally:
        backend.close()


# -- what a manifest cannot say, said ------------------------------------------------------

BROKEN = {
    "group without grid": ('group = ["16", "16"]', "group and grid go together"),
    "sizes in a group": ('group = ["N"]\ngrid = ["1"]', "a product's sizes are not known here"),
    "rows and a group": ('x = "rows"\ngroup = ["16"]\ngrid = ["cdiv(N, 16)"]', "x = 'rows'"),
    "no tiles nor launch": ("parameters = { W = [1, 2] }", "write its launch"),
    "a default not listed": (
        'parameters = { W = [1, 2] }\ndefaults = { W = 3 }\ngroup = ["16"]\ngrid = ["1"]',
        "defaults.W = 3",
    ),
    "an unknown function": ('group = ["16"]\ngrid = ["ceil(N / 16)"]', "the functions are cdiv"),
    "a float to an int": ("arguments = { M = 1.5 }", "bind it to no float"),
    "a template that is not": ('kernel = "matmul<REAL>"', "is no template"),
    "an unknown storage": ('storage = { B = "transposed" }', "column-major"),
}


@pytest.mark.parametrize("case", BROKEN, ids=str)
def test_a_manifest_that_cannot_express_a_kernel_says_which_key(case, tmp_path):
    extra, words = BROKEN[case]
    kernel = 'kernel = "matmul"' if "kernel =" not in extra else ""
    tiles = "tiles = [16]" if "parameters" not in extra else ""
    (tmp_path / "mine.cl").write_text(
        "__kernel void matmul(__global float* C, __global const float* A,\n"
        "                     __global const float* B, int M, int N, int K) { }\n"
    )
    (tmp_path / "family.toml").write_text(
        f'[family]\nname = "mine"\n\n[[variant]]\nname = "mine_v"\n{kernel}\n{tiles}\n{extra}\n'
    )
    with pytest.raises(ManifestError) as raised:
        load(tmp_path)
    assert words in str(raised.value), str(raised.value)
