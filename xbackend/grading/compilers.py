"""A CUDA source compiled where no CUDA device is here to build and run it.

On a machine with nvcc and no GPU (a teacher's laptop, CI), a submission's ``.cu`` file
would otherwise not be looked at: a syntax error would pass. Each CUDA variant is built
as the CUDA backend builds it (its family's ``-D`` options at its default tile, ``extern
"C"`` around a file that does not say it, its folder's headers) to PTX for one
architecture; nvcc's error is that kernel's verdict, and a clean build says that it was
compiled and not run.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from xbackend import families
from xbackend.backends.element import fitted, plan_element
from xbackend.backends.geometries import per_product
from xbackend.backends.kernels import cuda_text, include_folders, instances, read_kernel
from xbackend.backends.machine_code import cuda_tool
from xbackend.errors import XBackendError
from xbackend.grading.checking import default_dtype
from xbackend.grading.records import COMPILER, Verdict

if TYPE_CHECKING:
    from xbackend import Backend

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
    its build's errors, or that it compiles and was not run."""
    compiler = nvcc()
    if compiler is None or any(backend.name == "cuda" for _, backend in opened):
        return
    for variant in variants:
        spec = families.find_variant(variant)
        if "cuda" not in families.family(spec.family).sources or per_product(spec):
            continue
        element = np.dtype(dtype or default_dtype(spec))
        try:
            options = _options(spec, element)
            instanced = instances(spec.family, element.name)
            problem = compile_problem(compiler, spec.family, options, instanced)
        except XBackendError as error:
            problem = str(error).splitlines()[0]
        if problem:
            yield Verdict(COMPILER, variant, None, None, f"does not compile (nvcc): {problem}")
        else:
            said = f"compiled by nvcc for {ARCH}; no CUDA device here to run it"
            yield Verdict(COMPILER, variant, None, True, said)


def _options(spec: families.VariantSpec, dtype: np.dtype) -> tuple[str, ...]:
    """A variant's build options at its default configuration, for the smallest square
    product its rules take, or the nearest (a build may name the sizes: ``WIDTH = N``)."""
    sizes = fitted(spec, 16, 16, 16)
    if sizes is None:
        raise XBackendError(f"{spec.name} takes no product near 16×16 · 16×16 (its rules)")
    M, N, K = sizes
    A, B = np.ones((M, K), dtype), np.ones((K, N), dtype)
    return plan_element("mm", spec, A, B, spec.default_tile).launches[-1].options


@functools.cache
def compile_problem(
    compiler: str, family: str, options: tuple[str, ...], instanced: tuple[str, ...] = ()
) -> str:
    """nvcc's first errors building ``family``'s CUDA file with ``options`` and the
    template instances ``instanced`` ("" where it builds), each as ``file line N: error
    text``."""
    path, source = read_kernel(family, "cuda")
    built, as_it_is = cuda_text(source, instanced)
    text = built if as_it_is else f'extern "C" {{\n{source}\n}}\n'
    folders = [f"-I{folder}" for folder in include_folders(family, "cuda")]
    with tempfile.TemporaryDirectory(prefix="xbackend-nvcc-") as work:
        copy = Path(work) / path.name
        copy.write_text(text, encoding="utf-8")
        command = [compiler, "-ptx", f"-arch={ARCH}", *folders, *options, str(copy),
                   "-o", os.devnull]  # fmt: skip
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return f"nvcc took more than {TIMEOUT_S} s"
        except OSError as error:
            return f"nvcc could not run: {error}"
    if done.returncode == 0:
        return ""
    shift = 0 if as_it_is else 1  # the line extern "C" { added
    errors = [_located(line, path.name, shift) for line in done.stderr.splitlines()
              if (" error" in line or line.startswith("error"))
              and "detected in the compilation" not in line]  # fmt: skip
    return "; ".join(errors[:3]) or f"nvcc exit {done.returncode}"


def _located(line: str, name: str, shift: int) -> str:
    """nvcc's ``/tmp/…/a.cu(12): error: …`` as ``a.cu line 11: error: …`` (the line in
    the student's file)."""
    match = re.match(r"^.*?" + re.escape(name) + r"\((\d+)\): (.*)$", line)
    if match is None:
        return line.strip()[:200]
    return f"{name} line {int(match[1]) - shift}: {match[2].strip()[:200]}"
