"""A CUDA source compiled where no CUDA device is here to build and run it.

On a machine with nvcc and no GPU (a teacher's laptop, CI), a submission's ``.cu`` file
would otherwise not be looked at: a syntax error would pass. Each CUDA variant is built
as the CUDA backend builds it (its family's ``-D`` options at its default tile and at a
shape its rules take, ``extern "C"`` around a file that does not say it, its folder's
headers) to PTX for one architecture, and each kernel it launches is looked up in what was
built as the CUDA backend looks it up (``cubins.entry``: a template named without its
arguments is in no build). nvcc's error, or the kernel missing, is that variant's
verdict; a clean build says that it was compiled and not run. nvcc's deadline ends its
preprocessor and compilers too (``deadlines``).
"""

from __future__ import annotations

import dataclasses
import functools
import re
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from xbackend import families
from xbackend.backends.cubins import entry
from xbackend.backends.machine_code import cuda_tool
from xbackend.errors import XBackendError
from xbackend.grading.checking import default_dtype
from xbackend.grading.deadlines import run_to_deadline
from xbackend.grading.records import COMPILER, Verdict
from xbackend.grading.shapes import rule_shape
from xbackend.launches.element import plan_element
from xbackend.launches.geometries import per_product
from xbackend.launches.kernels import cuda_text, include_folders, instances, read_kernel
from xbackend.launches.launch import KernelLaunch

if TYPE_CHECKING:
    from xbackend.backends.interface import Backend

ARCH = "sm_90"  # any will do to find a syntax error; the H100's and H200's
TIMEOUT_S = 120


@functools.cache
def nvcc() -> str | None:
    """nvcc, where it is (``cuda_tool``), looked up once."""
    return cuda_tool("nvcc")


def nvcc_verdicts(
    variants: Sequence[str], opened: Sequence[tuple[str, Backend]], dtype: str | None
) -> Iterator[Verdict]:
    """A verdict for each CUDA variant no CUDA backend here builds, where nvcc is here:
    its build's errors, a kernel it launches that the build does not hold, or that it
    compiles and was not run."""
    compiler = nvcc()
    if compiler is None or any(backend.name == "cuda" for _, backend in opened):
        return
    for variant in variants:
        spec = families.find_variant(variant)
        if "cuda" not in families.family(spec.family).sources or per_product(spec):
            continue
        element = np.dtype(dtype or default_dtype(spec))
        try:
            problem = _problem(compiler, spec, element)
        except XBackendError as error:
            problem = f"does not compile: {str(error).splitlines()[0]}"
        if problem:
            yield Verdict(COMPILER, variant, None, None, problem)
        else:
            said = f"compiled by nvcc for {ARCH}; no CUDA device here to run it"
            yield Verdict(COMPILER, variant, None, True, said)


def _problem(compiler: str, spec: families.VariantSpec, element: np.dtype) -> str:
    """Why a variant's CUDA build would not run on a GPU ("" where it would): nvcc's
    errors, or a kernel it launches that its build does not hold."""
    launches = _launches(spec, element)
    instanced = instances(spec.family, element.name)
    for options in dict.fromkeys(launch.options for launch in launches):
        built = compiled(compiler, spec.family, options, instanced)
        if built.problem:
            return f"does not compile: {built.problem}"
        for launch in launches:
            if launch.options == options and not _holds(built.entries, launch.kernel):
                return _missing(spec.family, launch.kernel, built.entries)
    return ""


def _launches(spec: families.VariantSpec, dtype: np.dtype) -> list[KernelLaunch]:
    """A variant's kernel launches at its default configuration, for the smallest square
    product its rules take, or the nearest (a build may name the sizes: ``WIDTH = N``;
    a kernel of one size is built at that size)."""
    sizes = rule_shape(spec, 16, 16, 16)
    if sizes is None:
        raise XBackendError(f"{spec.name} takes no product near 16×16 · 16×16 (its rules)")
    M, N, K = sizes
    A, B = np.ones((M, K), dtype), np.ones((K, N), dtype)
    steps = plan_element("mm", spec, A, B, spec.default_tile).launches
    return [step for step in steps if isinstance(step, KernelLaunch)]


def _holds(entries: Sequence[str], kernel: str) -> bool:
    """Whether a build's entries hold ``kernel``, found as the CUDA backend finds it in
    a cubin (``cubins.entry``: its own name, or the symbol C++ mangled it to)."""
    table = b"\x00" + b"\x00".join(name.encode() for name in entries) + b"\x00"
    try:
        entry(table, kernel)
    except XBackendError:
        return False
    return True


def _missing(family: str, kernel: str, entries: Sequence[str]) -> str:
    """A kernel the build does not hold, said as a GPU says it, with what to change."""
    name = kernel.partition("<")[0].strip()
    _, source = read_kernel(family, "cuda")
    if "<" not in kernel and re.search(rf"template\s*<[^>]*>[^;{{]*?\b{re.escape(name)}\s*\(",
                                       source):  # fmt: skip
        hint = f"{name} is a template: name it with its arguments, {name}<REAL>"
    else:
        hint = f"the build holds {', '.join(_plain(e) for e in entries) or 'no kernel'}"
    return f"the CUDA build holds no kernel {kernel} (family.toml: kernel; {hint})"


def _plain(symbol: str) -> str:
    """An entry's name as its file writes it: ``_Z2mmIfEvPKT_...`` is ``mm``."""
    mangled = re.match(r"_Z(\d+)", symbol)
    if mangled is None:
        return symbol
    start = mangled.end()
    return symbol[start : start + int(mangled[1])]


@dataclasses.dataclass(frozen=True)
class Built:
    """What nvcc made of a file: its first errors ("" where it built), and its entries."""

    problem: str
    entries: tuple[str, ...] = ()


def compile_problem(
    compiler: str, family: str, options: tuple[str, ...], instanced: tuple[str, ...] = ()
) -> str:
    """nvcc's first errors building ``family``'s CUDA file with ``options`` and the
    template instances ``instanced`` ("" where it builds), each as ``file line N: error
    text``."""
    return compiled(compiler, family, options, instanced).problem


@functools.cache
def compiled(
    compiler: str, family: str, options: tuple[str, ...], instanced: tuple[str, ...] = ()
) -> Built:
    """``family``'s CUDA file built to PTX with ``options`` and the template instances
    ``instanced``, as the CUDA backend builds it: nvcc's first errors, or the entries."""
    path, source = read_kernel(family, "cuda")
    built, as_it_is = cuda_text(source, instanced)
    text = built if as_it_is else f'extern "C" {{\n{source}\n}}\n'
    folders = [f"-I{folder}" for folder in include_folders(family, "cuda")]
    with tempfile.TemporaryDirectory(prefix="xbackend-nvcc-") as work:
        copy, ptx = Path(work) / path.name, Path(work) / "built.ptx"
        copy.write_text(text, encoding="utf-8")
        command = [compiler, "-ptx", f"-arch={ARCH}", *folders, *options, str(copy),
                   "-o", str(ptx)]  # fmt: skip
        try:
            done = run_to_deadline(command, TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return Built(f"nvcc took more than {TIMEOUT_S} s")
        except OSError as error:
            return Built(f"nvcc could not run: {error}")
        if done.returncode == 0:
            said = ptx.read_text(encoding="utf-8", errors="replace")
            return Built("", tuple(re.findall(r"\.entry\s+([\w$]+)\s*\(", said)))
    shift = 0 if as_it_is else 1  # the line extern "C" { added
    errors = [_located(line, path.name, shift) for line in done.stderr.splitlines()
              if (" error" in line or line.startswith("error"))
              and "detected in the compilation" not in line]  # fmt: skip
    return Built("; ".join(errors[:3]) or f"nvcc exit {done.returncode}")


def _located(line: str, name: str, shift: int) -> str:
    """nvcc's ``/tmp/…/a.cu(12): error: …`` as ``a.cu:11: …`` (the line in the student's
    file), as a check says every compiler's error."""
    match = re.match(r"^.*?" + re.escape(name) + r"\((\d+)\): (.*)$", line)
    if match is None:
        return line.strip()[:200]
    message = re.sub(r"^error: ", "", match[2].strip())
    return f"{name}:{int(match[1]) - shift}: {message[:200]}"
