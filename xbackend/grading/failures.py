"""A kernel that could not run, said as what it is: a compile error with its file and line,
a launch its own attribute refuses with the attribute and the manifest's group.

The kernels' process describes an error as a point's reason (``measure.describe_error``:
the class's name, the backend's message, the compiler's lines), which is the words of a
log, not of a page a student reads. These read that description back and say it in the
student's terms, or return None where it is neither (the description then stands).
"""

from __future__ import annotations

import math
import re

from xbackend import families
from xbackend.errors import XBackendError
from xbackend.families import VariantSpec
from xbackend.families.expressions import evaluate

__all__ = ["compile_said", "refused_said"]

# "KernelCompileError: opencl: oscar.cl failed to compile for DEVICE; LOG LINE; ..." (the
# log's lines with "error", joined by "; ": measure.describe_error).
_COMPILE = re.compile(r"^KernelCompileError: \w+: (?P<file>.+?) failed to compile for ")
# A compiler's line: clang's "[source:]LINE:COLUMN: error: message" (Intel's and pocl's
# OpenCL: "1:11:59: error: ..."), nvcc's "file.cu(LINE): error: message".
_CLANG = re.compile(r"(?:^|:)(?P<line>\d+):\d+: (?:fatal )?error: (?P<message>.+)$")
_NVCC = re.compile(r"\((?P<line>\d+)\): (?:catastrophic )?error: (?P<message>.+)$")
_REFUSED = "the device refused work-groups of "
_REQUIRED = re.compile(r"reqd_work_group_size\s*\(([^()]*)\)")
_BOUNDS = re.compile(r"__launch_bounds__\s*\(([^()]*)\)")
_CUDA_LAUNCH = "cuLaunchKernel failed"


def compile_said(text: str) -> str | None:
    """``does not compile: oscar.cl:11: extraneous ')' before ';'`` from a described
    compile error (its first error line, else its first line of log); None where
    ``text`` is not one."""
    first = text.splitlines()[0] if text else ""
    found = _COMPILE.match(first)
    if found is None:
        return None
    file = found["file"]
    parts = first.split("; ")[1:]
    for part in parts:
        line = _CLANG.search(part.strip()) or _NVCC.search(part.strip())
        if line is not None:
            return f"does not compile: {file}:{line['line']}: {line['message'].strip()}"
    said = parts[0].strip() if parts else "its compiler gave no error line"
    return f"does not compile: {file}: {said}"


def refused_said(text: str, spec: VariantSpec) -> str | None:
    """Where the device refused the launch's groups and the kernel's source bounds them
    (OpenCL's ``reqd_work_group_size``, CUDA's ``__launch_bounds__`` past which a launch
    fails): the attribute, its line and the manifest's group; None where ``text`` is not
    such a refusal."""
    group = (
        f"group = [{', '.join(map(str, spec.group))}]"
        if spec.group
        else f"groups of TILE×TILE at default_tile = {spec.default_tile}"
    )
    if _REFUSED in text:
        groups = text.split(_REFUSED, 1)[1].split(" ", 1)[0]
        launched = f"the manifest's work-groups of {groups} (family.toml: {group})"
        attribute = _attribute(spec, "opencl", _REQUIRED)
        if attribute is None:
            return f"the device refused {launched}"
        return f"the kernel's {attribute[0]} refuses {launched}"
    if _CUDA_LAUNCH not in text:
        return None
    attribute = _attribute(spec, "cuda", _BOUNDS)
    threads = _threads(spec)
    if attribute is None or threads is None:
        return None
    bound = attribute[1].split(",")[0].strip()
    if bound.isdigit() and int(bound) >= threads[0]:
        return None  # within its bounds: the launch failed for another reason
    blocks = f"blocks of {threads[1]} = {threads[0]} threads (family.toml: {group})"
    return f"the kernel's {attribute[0]} refuses the manifest's {blocks}"


def _threads(spec: VariantSpec) -> tuple[int, str] | None:
    """The workers of one group of the variant's own launch at its default tile, and its
    shape in words (``16×16``); None where they have no value."""
    try:
        names = spec.names_at(spec.default_tile)
        if spec.group:
            sizes = [int(evaluate(size, names)) for size in spec.group]
        else:
            tile, tm, tn = names["TILE"], names["TM"], names["TN"]
            sizes = [tile // tn, tile // tm]
    except (ArithmeticError, ValueError, TypeError, KeyError, XBackendError):
        return None
    return math.prod(sizes), "×".join(map(str, sizes))


def _attribute(
    spec: VariantSpec, language: str, pattern: re.Pattern[str]
) -> tuple[str, str] | None:
    """``reqd_work_group_size(8, 8, 1) (fixed.cl line 4)`` and its arguments: the
    attribute on the variant's kernel in its ``language``'s file, as written, or None."""
    source = families.family(spec.family).sources.get(language)
    if source is None:
        return None
    try:
        text = source.read_text(errors="replace")
    except OSError:
        return None
    name = spec.launch.function
    declared = re.search(rf"\bvoid\s+{re.escape(name)}\s*\(", text)
    if declared is None:
        return None
    # The attribute between the declaration before this one and this kernel's name.
    start = max(text.rfind(";", 0, declared.start()), text.rfind("}", 0, declared.start()))
    found = list(pattern.finditer(text, start + 1, declared.start()))
    if not found:
        return None
    at = found[-1]
    line = text.count("\n", 0, at.start()) + 1
    arguments = ", ".join(size.strip() for size in at[1].split(","))
    return f"{at[0].split('(')[0].strip()}({arguments}) ({source.name} line {line})", arguments
