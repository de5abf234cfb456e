"""What Python knows of the kernel files: where they are, their kernels' parameters,
the constants it passes them, and a digest of what a kernel is built from.

Every constant a kernel needs reaches it as a ``-D`` option from here or from
``warp.py``; the files keep ``#ifndef`` defaults only so that each compiles alone.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable
from pathlib import Path

from xbackend.errors import XBackendError
from xbackend.resources import kernel_file

# The C type each dtype becomes in the kernels (-DREAL=...).
C_TYPES = {"int32": "int", "float32": "float", "float64": "double"}
SUM_BLOCK = 256  # threads per block of the sums: mm_sum_slices and rmm_pair_sums
REG_BK = 8  # depth of mm_reg's slabs along K
SUFFIXES = {"cuda": ".cu", "opencl": ".cl"}
# The build option that makes the kernels' element offsets 64-bit: their parameters
# declared INDEX (leading dimensions, strides) then take 64-bit ints (see plans.py for
# when a product needs it). The same word in both languages; each file says its type.
WIDE_INDEX = "-DWIDE_INDEX"
INDEX_TYPE = "INDEX"
# The build option that makes every kernel stamp the device's clock as each group starts
# and ends (kernels/*/stamp.h): its launches then take the stamps buffer and a slot.
STAMP = "-DSTAMP"
STAMP_PARAMETERS = ("stamps", "stamp_slot")
# The hooks of stamp.h, as the kernel files write them: the include, the parameter
# macro after a kernel's last parameter, and a line at its start and one at its end.
_HOOKS = re.compile(
    r'^#include "stamp\.h"\n| STAMP_PARAMETER(?=\))|^[ \t]*STAMP_(?:ENTER|EXIT);\n', re.MULTILINE
)

# The vendor's GEMM takes its arguments in this order: row-major C (M×N) = A (M×K) · B (K×N).
# A kernel's parameters are read from its file (``parameters``).
GEMM_PARAMETERS = ("M", "N", "K", "A", "lda", "B", "ldb", "C", "ldc")
# A kernel's declaration in either language: its name, then its parameter list.
_DECLARATION = re.compile(r'^(?:extern "C" __global__ )?void\s+(\w+)\s*\(([^)]*)\)', re.MULTILINE)


@functools.cache
def declarations(family: str, language: str) -> dict[str, tuple[tuple[str, str], ...]]:
    """Each kernel of a file with its parameters, in order, as (name, the words before
    it): ``("lda", "const INDEX")``, ``("A", "__global const REAL* restrict")``."""
    _, text = read_kernel(family, language)
    found = {}
    for name, params in _DECLARATION.findall(without_stamps(text)):
        words = [param.replace("*", "* ").split() for param in params.split(",")]
        found[name] = tuple((param[-1], " ".join(param[:-1])) for param in words)
    return found


def declared(family: str, language: str) -> dict[str, tuple[str, ...]]:
    """Each kernel of a file with its parameter names, in order, as the file declares them."""
    return {
        name: tuple(param for param, _ in params)
        for name, params in declarations(family, language).items()
    }


def _declaration(family: str, kernel: str) -> tuple[tuple[str, str], ...]:
    for language in ("opencl", "cuda"):
        if kernel_file(language, f"{family}{SUFFIXES[language]}").is_file():
            found = declarations(family, language).get(kernel)
            if found is not None:
                return found
    raise XBackendError(f"no kernel {kernel} is declared in the {family} kernel files")


def parameters(family: str, kernel: str) -> tuple[str, ...]:
    """The parameter names of ``kernel`` in ``kernels/*/family``: a launch names its
    arguments, and these order them. The twins declare the same (tests/test_kernels.py);
    the OpenCL file is read, or the CUDA one for a kernel that has no twin."""
    return tuple(name for name, _ in _declaration(family, kernel))


def index_parameters(family: str, kernel: str) -> frozenset[str]:
    """The parameters of ``kernel`` declared ``INDEX``: 64-bit ints in a build with
    ``WIDE_INDEX``, 32-bit ones otherwise (every other integer parameter is an int)."""
    return frozenset(
        name for name, words in _declaration(family, kernel) if INDEX_TYPE in words.split()
    )


def read_kernel(family: str, language: str) -> tuple[Path, str]:
    """The path and text of a kernel file, e.g. ``read_kernel("mm", "opencl")``.

    A file that is not UTF-8 text (a folder, a binary, NUL bytes) is an
    ``XBackendError`` naming it, never a driver's confusion.
    """
    path = kernel_file(language, f"{family}{SUFFIXES[language]}")
    try:
        if not path.is_file():
            what = "a folder" if path.is_dir() else "missing or not a regular file"
            raise XBackendError(f"the kernel file {path} is {what}")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise XBackendError(f"cannot read the kernel file {path} as UTF-8 text: {error}") from error
    if "\x00" in text:
        raise XBackendError(f"the kernel file {path} holds NUL bytes: it is not source text")
    return path, text


def include_folder(language: str) -> Path:
    """The folder the kernel files' ``#include "stamp.h"`` is found in: the
    ``XBACKEND_KERNELS`` folder where it has the header, else the shipped one."""
    return kernel_file(language, "stamp.h").parent


@functools.cache
def has_stamps(family: str, language: str) -> bool:
    """Whether a kernel file's kernels take the clock's hooks (kernels/*/stamp.h)."""
    _, text = read_kernel(family, language)
    return "STAMP_PARAMETER" in text


def without_stamps(text: str) -> str:
    """A kernel file's text without the clock's hooks (kernels/*/stamp.h): the code a
    build without ``STAMP`` compiles, since the hooks are then nothing."""
    return _HOOKS.sub("", text)


def source_digest(family: str, language: str, options: Iterable[str] = ()) -> str:
    """A digest of a kernel file's text and of build options: a choice tuned for one
    kernel is stale once either changes (see ``Backend.kernel_build``). The clock's
    hooks are left out: they compile to nothing in the builds that are tuned."""
    _, text = read_kernel(family, language)
    digest = hashlib.sha256(without_stamps(text).encode())
    for option in options:
        digest.update(b"\x00" + option.encode())
    return digest.hexdigest()[:16]
