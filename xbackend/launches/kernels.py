"""What Python knows of the kernel files: where they are, their kernels' parameters,
the constants it passes them, and a digest of what a kernel is built from.

Every constant a kernel needs reaches it as a ``-D`` option from here or from
``warp.py``; the files keep ``#ifndef`` defaults only so that each compiles alone.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

from xbackend import families
from xbackend.errors import XBackendError
from xbackend.families import sources
from xbackend.families.sources import (
    STAMP_PARAMETERS,
    SUFFIXES,
    Declarations,
    check_includes,
    declarations_of,
    passing,
    read_source,
    with_hooks,
    without_stamps,
)
from xbackend.resources import KERNELS_ENV, kernel_file

__all__ = [  # the stamps' words are the sources', re-exported for the launches
    "STAMP",
    "STAMP_PARAMETERS",
    "SUFFIXES",
    "without_stamps",
]

# The C type each dtype becomes in the kernels (-DREAL=...).
C_TYPES = {"int32": "int", "float32": "float", "float64": "double"}
SUM_BLOCK = 256  # threads per block of the sums: mm_sum_slices and rmm_pair_sums
# The build option that makes the kernels' element offsets 64-bit: their parameters
# declared INDEX (leading dimensions, strides) then take 64-bit ints (see plans.py for
# when a product needs it). The same word in both languages; each file says its type.
WIDE_INDEX = "-DWIDE_INDEX"
INDEX_TYPE = "INDEX"
# The build option that makes every kernel stamp the device's clock as each group starts
# and ends (kernels/*/stamp.h): its launches then take the stamps buffer and a slot.
STAMP = "-DSTAMP"

# The vendor's GEMM takes its arguments in this order: row-major C (M×N) = A (M×K) · B (K×N).
# A kernel's parameters are read from its file (``parameters``).
GEMM_PARAMETERS = ("M", "N", "K", "A", "lda", "B", "ldb", "C", "ldc")


def source_path(family: str, language: str) -> Path:
    """A family's kernel file in ``language``: the ``XBACKEND_KERNELS`` folder's
    ``language/<file>`` where it has one (to try an edited kernel, of any family: a
    ``--kernels`` family's too), else the family's."""
    found = families.find(family)
    if found is None:  # a support kernel of kernels/<language>/: hold, ceilings, probe
        return kernel_file(language, f"{family}{SUFFIXES[language]}")
    if language not in found.sources:
        raise XBackendError(f"the {family} family has no {language} source ({found.manifest})")
    path = found.sources[language]
    # Only a folder the variable names replaces files: without it, a user's file named as
    # a support kernel of kernels/<language>/ (ceilings.cl) stays the user's.
    replacing = os.environ.get(KERNELS_ENV)
    override = Path(replacing) / language / path.name if replacing else path
    return override if os.path.lexists(override) and override != path else path


def source_declarations(family: str, language: str) -> Declarations:
    """What a family's file declares: its kernels, structs and kernel templates. Kept by
    the file's path and its state on disk, never by the family's name alone: another
    folder's family of that name, or the file edited, is read anew."""
    path = source_path(family, language)
    found = families.find(family)
    return _declarations_in(path, _state(path), found.defined if found else frozenset())


def _state(path: Path) -> tuple[int, int, int]:
    """A file's state on disk, as a cache of what was read from it is keyed."""
    try:
        found = path.stat()
    except OSError:
        return (0, 0, 0)  # read_source names what is wrong with it
    return (found.st_ino, found.st_size, found.st_mtime_ns)


@functools.cache
def _declarations_in(
    path: Path, state: tuple[int, int, int], defined: frozenset[str]
) -> Declarations:
    try:
        return declarations_of(read_source(path), defined)
    except XBackendError as error:  # a replacement file's refusal names it, as a family's
        said = str(error)
        raise XBackendError(said if str(path) in said else f"{path}: {said}") from None


def _forget() -> None:
    _declarations_in.cache_clear()
    _stamps_in.cache_clear()


def declarations(family: str, language: str) -> dict[str, tuple[tuple[str, str], ...]]:
    """Each kernel of a file with its parameters, in order, as (name, the words before
    it): ``("lda", "const INDEX")``, ``("A", "__global const REAL* restrict")``."""
    found = source_declarations(family, language).kernels
    return {name: params for name, (params, _) in found.items()}


def declared(family: str, language: str) -> dict[str, tuple[str, ...]]:
    """Each kernel of a file with its parameter names, in order, as the file declares them."""
    return {
        name: tuple(param for param, _ in params)
        for name, params in declarations(family, language).items()
    }


def _declaring(family: str, kernel: str) -> Declarations:
    """The declarations of the file that declares ``kernel`` (``mm<REAL>``: ``mm``): the
    OpenCL one, or the CUDA one for a family without it (the twins agree)."""
    kernel = function_name(kernel)
    found_family = families.find(family)
    for language in ("opencl", "cuda"):
        if found_family is not None and language not in found_family.sources:
            continue  # a family in one language (a CUDA-only one: its .cu file)
        if source_path(family, language).is_file():
            found = source_declarations(family, language)
            if kernel in found.kernels:
                return found
    raise XBackendError(f"no kernel {kernel} is declared in the {family} kernel files")


def _declaration(family: str, kernel: str) -> tuple[tuple[str, str], ...]:
    return _declaring(family, kernel).kernels[function_name(kernel)][0]


def function_name(kernel: str) -> str:
    """The function a kernel name calls: ``mm<float>`` calls the template ``mm``."""
    return kernel.split("<", 1)[0].strip()


def kinds(family: str, kernel: str) -> dict[str, str]:
    """How each parameter of ``kernel`` is passed (``Declarations.kind``): "buffer",
    "int32", "int64", "float32", "float64", "real" (the element type) or "struct"."""
    found = _declaring(family, kernel)
    name = function_name(kernel)
    return {param: found.kind(name, words) for param, words in found.kernels[name][0]}


def struct_fields(family: str, kernel: str, parameter: str) -> tuple[tuple[str, str], ...]:
    """The fields of a struct parameter of ``kernel``, in order, each with how it is
    passed (as ``kinds``)."""
    found = _declaring(family, kernel)
    words = dict(found.kernels[function_name(kernel)][0])[parameter]
    return tuple((field, passing(kind)) for field, kind in found.structs[words.split()[-1]])


def struct_packing(family: str, kernel: str, parameter: str) -> int:
    """The ``#pragma pack`` a struct parameter of ``kernel`` is laid out under (0: none,
    its fields at their natural alignment)."""
    found = _declaring(family, kernel)
    words = dict(found.kernels[function_name(kernel)][0])[parameter]
    return max(found.packs.get(words.split()[-1], 0), 0)


def extern_c(source: str) -> bool:
    """Whether a CUDA source declares its kernels ``extern "C"`` itself (the shipped ones
    do); else the compiler is asked to, so that a kernel is found by its own name."""
    return 'extern "C"' in source


def instances(family: str, dtype: str) -> tuple[str, ...]:
    """The template instances a family's variants launch in ``dtype`` (``mm<REAL>``: in
    float32, ``mm<float>``), which its CUDA build must instantiate."""
    found = families.find(family)
    if found is None:
        return ()
    named = {
        launch.kernel.replace("REAL", C_TYPES[dtype])
        for _, spec in found.variants
        for launch in spec.launches
        if "<" in launch.kernel
    }
    return tuple(sorted(named))


def cuda_text(source: str, instanced: Iterable[str] = ()) -> tuple[str, bool]:
    """The text nvcc builds of a CUDA source, and whether it goes as it is (no ``extern
    "C"`` put around it: it says so itself, or it declares templates, which C linkage
    cannot hold). Each template instance is taken by address after the source, which
    makes nvcc build it; its kernel is then found by its mangled name (``cubins.entry``)."""
    instanced = tuple(instanced)
    taken = "".join(
        f"static void* const xbackend_instance_{n} __attribute__((unused)) = (void*)&{name};\n"
        for n, name in enumerate(instanced)
    )
    text = f"{source}\n{taken}" if taken else source
    return text, extern_c(source) or bool(instanced) or "template" in source


def parameters(family: str, kernel: str) -> tuple[str, ...]:
    """The parameter names of ``kernel`` in ``family``: a launch names its arguments, and
    these order them. The twins declare the same (tests/test_kernels.py); the OpenCL file
    is read, or the CUDA one for a family that has no OpenCL source."""
    return tuple(name for name, _ in _declaration(family, kernel))


def index_parameters(family: str, kernel: str) -> frozenset[str]:
    """The parameters of ``kernel`` declared ``INDEX``: 64-bit ints in a build with
    ``WIDE_INDEX``, 32-bit ones otherwise (every other integer parameter is an int)."""
    return frozenset(
        name for name, words in _declaration(family, kernel) if INDEX_TYPE in words.split()
    )


def long_parameters(family: str, kernel: str) -> frozenset[str]:
    """The parameters of ``kernel`` its file declares 64-bit (``size_t``, ``ulong``, ...):
    passed as 64-bit ints in every build."""
    return frozenset(
        name for name, words in _declaration(family, kernel) if passing(words) == "int64"
    )


def read_kernel(family: str, language: str, stamped: bool = False) -> tuple[Path, str]:
    """The path and text of a family's kernel file, e.g. ``read_kernel("mm", "opencl")``;
    ``stamped``: with the clock's hooks, put in where the file was written without them
    (a user's kernels: ``sources.with_hooks``).

    A file that is not UTF-8 text (a folder, a binary, NUL bytes) is an
    ``XBackendError`` naming it, never a driver's confusion.
    """
    path = source_path(family, language)
    text = read_source(path)
    found = families.find(family)
    if found is not None and found.sources.get(language) != path:  # a replacement file:
        check_includes(path, text, include_folders(family, language))  # checked as read
    return path, with_hooks(text) if stamped else text


def include_folders(family: str, language: str) -> list[Path]:
    """The folders a family's ``#include`` finds files in: its file's (a replacement's,
    then the family's own), then the one with ``stamp.h`` (the ``XBACKEND_KERNELS``
    folder's where it has the header)."""
    own = source_path(family, language).parent
    found = families.find(family)
    family_folder = [found.folder] if found is not None and found.folder != own else []
    return [own, *family_folder, kernel_file(language, "stamp.h").parent]


def has_stamps(family: str, language: str) -> bool:
    """Whether a kernel file's kernels take the clock's hooks (kernels/*/stamp.h): written
    into it, or put in for a stamped build (a file whose kernels cannot be found whole,
    a body not closed, keeps the API's clock). Kept as ``source_declarations`` is."""
    path = source_path(family, language)
    return _stamps_in(path, _state(path), families.find(family) is None)


@functools.cache
def _stamps_in(path: Path, state: tuple[int, int, int], support: bool) -> bool:
    text = read_source(path)
    if support:  # a support kernel (ceilings, hold) is not stamped
        return sources.has_stamps(text)
    try:
        return sources.has_stamps(with_hooks(text))
    except ValueError:
        return False


def source_digest(family: str, language: str, options: Iterable[str] = ()) -> str:
    """A digest of a kernel file's code and of build options: a choice tuned for one
    kernel is stale once either changes (see ``Backend.kernel_build``). Its comments and
    the clock's hooks are left out (``sources.code_lines``): the hooks compile to nothing
    in the builds that are tuned."""
    _, text = read_kernel(family, language)
    digest = hashlib.sha256(sources.code_lines(text).encode())
    for option in options:
        digest.update(b"\x00" + option.encode())
    return digest.hexdigest()[:16]


# A worker that outlives a run reads the families again (``families.read_again``): what was
# parsed of their files goes with them, so a kernel's reordered parameters bind anew.
families.forget_on_read_again(_forget)
