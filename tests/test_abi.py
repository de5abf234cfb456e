"""Issue 40, the ABI: a kernel parameter is passed as its file declares it, or refused by
name, never silently mis-packed. Sizes declared 64-bit (``size_t`` in CUDA, ``ulong`` in
OpenCL) are passed as 64-bit integers (packed as 32-bit ints, the kernel read garbage
sizes, or OpenCL refused the argument with a raw INVALID_ARG_SIZE); a struct where an
operand's pointer goes, a float scalar, and twins that declare one parameter with two
widths are refused when the manifest is read; so are a struct whose fields and a float
whose value are not bound (they are passed once bound: tests/test_styles.py).

The kernels are files: tests/kernels/abi/ (its README says which is which).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from xbackend import families
from xbackend.families.manifest import ManifestError
from xbackend.families.sources import passing
from xbackend.operations import Shape, make_operands
from xbackend.problems import Reference, check
from xbackend.pytest_plugin import needs_backend

ABI = Path(__file__).resolve().parent / "kernels" / "abi"
SEED = 20261127


@pytest.fixture
def catalogue(own_families):
    """A catalogue of the shipped families and the folder a test adds."""

    def add(name: str) -> Path:
        folder = ABI / name
        families.add_folders([folder])
        return folder

    return add


@pytest.mark.parametrize(
    ("words", "kind"),
    [("__global const float*", "buffer"), ("const float *", "buffer"), ("int", "int32"),
     ("const int", "int32"), ("INDEX", "int32"), ("unsigned int", "int32"),
     ("size_t", "int64"), ("const size_t", "int64"), ("ulong", "int64"),
     ("unsigned long long", "int64"), ("long", "int64"), ("float", "float32"),
     ("double", "float64"), ("REAL", "real"),
     ("Matrix", ""), ("const Matrix", ""), ("float4", "")],
)  # fmt: skip
def test_a_parameter_is_passed_as_its_type_says(words, kind):
    assert passing(words) == kind


@pytest.mark.parametrize("backend_name", ["opencl", "cuda"])
def test_sizes_declared_64_bit_are_passed_64_bit(backend_name, catalogue):
    needs_backend(backend_name)
    import xbackend

    catalogue("wide_sizes")
    backend = xbackend.get_backend(backend_name)
    try:
        for shape in (Shape(7, 13, 5), Shape(33, 20, 17), Shape(129, 67, 271)):
            A, B = make_operands(shape, SEED)
            C = backend.matmul(A, B, "wide_sizes_naive", 16)
            found = check(C, Reference.of(A, B))
            assert found.equal, (shape, found)
    finally:
        backend.close()


@pytest.mark.parametrize(
    ("folder", "words"),
    [("struct_sizes", ["parameter 'A' of mm_struct", "is a struct", 'arguments."A.rows"']),
     ("scaled", ["parameter 'alpha' of mm_scaled", "'float'", "a number"]),
     ("mixed_twins", ["mm_mixed", "'M'", "mixed.cl", "mixed.cu", "32-bit", "64-bit"])],
)  # fmt: skip
def test_what_xbackend_cannot_pass_is_refused_by_name(folder, words, catalogue):
    with pytest.raises(ManifestError) as raised:
        catalogue(folder)
    said = str(raised.value)
    assert str(ABI / folder / "family.toml") in said
    for word in words:
        assert word in said, (word, said)


def test_the_shipped_kernels_take_buffers_and_32_bit_ints_as_before():
    """Every parameter of every shipped kernel, in both files: a buffer, or an int (its
    INDEX sizes widened only by a wide build), so their launches are packed as before."""
    from xbackend.families.sources import kernels_of, read_source

    seen = 0
    for each in families.catalogue():
        if not each.shipped:
            continue
        for path in each.sources.values():
            for name, (params, _) in kernels_of(read_source(path)).items():
                for param, words in params:
                    assert passing(words) in ("buffer", "int32"), (path.name, name, param, words)
                    seen += 1
    assert seen > 100  # the shipped files were read
