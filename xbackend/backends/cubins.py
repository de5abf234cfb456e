"""The CUDA backend's own cache of compiled kernels (cubins), keyed without the compiler.

PyCUDA caches a module by the text nvcc's preprocessor makes of it, so that an edited
header is seen: each load runs ``nvcc -E`` first, 0.1 s a module on a 16-core H200 host,
1.5 s of a 25 s plan of 15 modules (docs/notebook/cluster.md). This cache keys a cubin by what
goes into it, read here: the compiler's version, the architecture, the options, the
source and every header of the folders it includes from. A load is then a file read.

The cubins live in ``$XDG_CACHE_HOME/xbackend/cuda`` (``~/.cache`` by default). A cache
that cannot be written is not an error: the cubin is compiled and used, not kept.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from xbackend.errors import XBackendError
from xbackend.launches.kernels import cuda_text, include_folders
from xbackend.resources import user_cache_dir
from xbackend.safeio import atomic_write

# What an ``#include`` of a kernel file may name in its folders: every such file is in
# the key, read or not (a folder of kernels holds a few).
HEADER_SUFFIXES = (".h", ".cuh", ".hpp", ".inc", ".cu")

Compiler = Callable[..., bytes]  # pycuda.compiler.compile's signature


# Set (to anything) to build every kernel with -lineinfo: compute-sanitizer then names the
# line of the kernel's file of each report (``grading/sanitizers.py``).
LINEINFO_ENV = "XBACKEND_CUDA_LINEINFO"


def family_cubin(
    family: str, source: str, options: Sequence[str], arch: str,
    instanced: Sequence[str] = (), fresh: bool = False,
) -> bytes:  # fmt: skip
    """The cubin of a family's CUDA file (its ``source``, as read) built with ``options``
    for ``arch``: its template instances ``instanced`` taken (``kernels.cuda_text``), its
    own folder's headers and stamp.h found, with -lineinfo where ``LINEINFO_ENV`` is set."""
    folders = [str(folder) for folder in include_folders(family, "cuda")]
    if os.environ.get(LINEINFO_ENV):  # a sanitizer's reports name the kernel's lines
        options = (*options, "-lineinfo")
    text, as_it_is = cuda_text(source, instanced)
    return cubin(text, options, arch, folders, as_it_is, fresh=fresh)


def cache_folder() -> Path:
    return user_cache_dir() / "cuda"


def cubin(
    source: str,
    options: Sequence[str],
    arch: str,
    include_dirs: Sequence[str],
    no_extern_c: bool,
    compiler: Compiler | None = None,
    fresh: bool = False,
) -> bytes:
    """The cubin of ``source`` built with ``options`` for ``arch`` (``sm_90``): from the
    cache where built before, else compiled by ``compiler`` (PyCUDA's) and kept;
    ``fresh``: compiled again whatever the cache holds (a cached cubin the driver
    refused), and kept in its place."""
    path = cache_folder() / f"{key(source, options, arch, include_dirs, no_extern_c)}.cubin"
    if not fresh:
        try:
            return path.read_bytes()
        except OSError:
            pass
    built = (compiler or _nvcc)(
        source, options=list(options), no_extern_c=no_extern_c, arch=arch,
        include_dirs=list(include_dirs),
    )  # fmt: skip
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, built)
    except OSError:
        pass  # a cache that cannot be written: built each time, as without one
    return built


def _nvcc(source: str, **how: object) -> bytes:
    """PyCUDA's nvcc, its own cache off (this one replaces it)."""
    from pycuda.compiler import compile as nvcc

    return bytes(nvcc(source, cache_dir=False, **how))


def key(
    source: str, options: Sequence[str], arch: str, include_dirs: Sequence[str], no_extern_c: bool
) -> str:
    """The digest a cubin is kept under: everything that goes into it."""
    digest = hashlib.sha256()
    for part in (nvcc_version(), arch, str(no_extern_c), *options, source):
        digest.update(part.encode() + b"\x00")
    for folder in include_dirs:
        for header in _headers(Path(folder)):
            digest.update(str(header).encode() + b"\x00")
            digest.update(header.read_bytes() + b"\x00")
    return digest.hexdigest()[:32]


def _headers(folder: Path) -> list[Path]:
    try:
        found = [path for path in folder.iterdir() if path.suffix in HEADER_SUFFIXES]
    except OSError:
        return []  # nvcc will say what it cannot find
    return sorted(path for path in found if path.is_file())


@functools.cache
def nvcc_version() -> str:
    """``nvcc --version`` as PyCUDA runs it (the ``nvcc`` on PATH); empty where it does
    not run (the compile then says why)."""
    try:
        done = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout


# How nvcc's mangled names write a template's type arguments (the Itanium C++ ABI).
_TYPE_CODES = {
    "float": "f", "double": "d", "int": "i", "unsigned": "j", "unsigned int": "j",
    "long": "l", "unsigned long": "m", "size_t": "m", "long long": "x",
    "unsigned long long": "y", "char": "c", "bool": "b", "short": "s",
}  # fmt: skip


def entry(cubin: bytes, kernel: str) -> str:
    """The symbol of ``kernel`` in a cubin built without ``extern "C"``: ``mm<float>`` is
    ``_Z2mmIfEv...``, a plain ``mm`` ``_Z2mmP...``; the name itself where it is there
    unmangled. An ``XBackendError`` where the cubin holds no such kernel."""
    name, _, rest = kernel.partition("<")
    name = name.strip()
    if not rest:
        pattern = rf"(?:{re.escape(name)}|_Z{len(name)}{re.escape(name)}(?!I)\w*)"
    else:
        codes = []
        for argument in rest.rpartition(">")[0].split(","):
            word = " ".join(argument.split())
            if word.lstrip("-").isdigit():
                value = int(word)
                codes.append(rf"L[a-z]{'n' if value < 0 else ''}{abs(value)}E")
            elif word in _TYPE_CODES:
                codes.append(_TYPE_CODES[word])
            else:
                raise XBackendError(f"{kernel}: xbackend instantiates templates of numbers "
                                    f"and of {', '.join(_TYPE_CODES)}, not {word!r}")  # fmt: skip
        pattern = rf"_Z{len(name)}{re.escape(name)}I{''.join(codes)}E\w*"
    found = re.search(rb"(?<![\w.])(" + pattern.encode() + rb")\x00", cubin)
    if found is None:
        raise XBackendError(f"the CUDA build holds no kernel {kernel}")
    return found.group(1).decode()
