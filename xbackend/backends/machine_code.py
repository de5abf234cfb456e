"""What the compilers made of a kernel: its registers, spills and shared memory, and the
instructions of its hot loop, read from its PTX through CUDA's assembler.

Both APIs compile a kernel to PTX first: nvcc's front end for CUDA, the driver's for
NVIDIA's OpenCL (the program's binary is its PTX). ``ptxas -v`` assembles that PTX for
the device's architecture and says what the function uses: registers a thread, bytes of
stack and of spills, static shared memory a block. Where a disassembler is installed
(nvdisasm: the CUDA toolkit's, or the ``nvidia-cuda-nvdisasm`` wheel's), the machine code's
hot loop is counted instruction by instruction: the innermost loop with the most fused
multiply-adds, the loop over k of a matrix product.

One assembler for both sides, the toolkit's: the CUDA backend's cubin is nvcc's, built by
that same ptxas, so its numbers are what ran; NVIDIA's OpenCL assembles its PTX in the
driver, whose ptxas may be another version's, so its numbers are what the two front ends
hand one back end (the registers the driver allocated may differ by a few).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from xbackend.errors import XBackendError
from xbackend.launches.kernels import STAMP, cuda_text, include_folders, instances, read_kernel
from xbackend.launches.launch import KernelLaunch

TIMEOUT_S = 120
# The instructions that do a product's arithmetic: a loop's count of them finds the hot one.
_ARITHMETIC = ("FFMA", "DFMA", "HFMA2", "IMAD", "HMMA", "IMMA")
# An IMAD or HFMA2 with these parts moves, shifts or adds addresses: no product's arithmetic.
_NOT_ARITHMETIC = {"MOV", "SHL", "WIDE", "MMA", "X", "HI", "IADD"}


def cuda_tool(name: str) -> str | None:
    """A tool of CUDA's (nvcc, ptxas, nvdisasm, compute-sanitizer) on the PATH, else in
    CUDA's usual place (``CUDA_HOME``, else /usr/local/cuda), else in NVIDIA's wheels
    (``nvidia/cu*/bin``); None where there is none."""
    usual = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / name
    found = shutil.which(name) or (str(usual) if usual.is_file() else None)
    if found is None and importlib.util.find_spec("nvidia") is not None:
        import nvidia  # a namespace package: the folders of NVIDIA's wheels

        wheels = sorted(
            path for root in nvidia.__path__ for path in Path(root).glob(f"cu*/bin/{name}")
        )
        found = str(wheels[-1]) if wheels else None  # the newest CUDA's
    return found


@dataclasses.dataclass(frozen=True)
class MachineCode:
    """One function as ptxas built it, and its hot loop's instructions where disassembled."""

    registers: int
    shared_bytes: int  # static shared memory a block
    stack_bytes: int
    spill_stores: int  # bytes
    spill_loads: int
    # Each instruction (its mnemonic with modifiers) and how often it is in the hot loop;
    # the whole function where it has no loop; None where no disassembler is installed.
    hot_loop: tuple[tuple[str, int], ...] | None = None

    def resources(self) -> str:
        spills = (f"{self.spill_stores}+{self.spill_loads} B spilled"
                  if self.spill_stores or self.spill_loads else "no spills")  # fmt: skip
        return f"{self.registers} registers, {self.shared_bytes} B shared, {spills}"

    def loop(self) -> str:
        """The hot loop in a few words: its length and its most frequent instructions."""
        if self.hot_loop is None:
            return "hot loop not read (no nvdisasm)"
        total = sum(count for _, count in self.hot_loop)
        common = ", ".join(f"{count} {name}" for name, count in self.hot_loop[:4])
        return f"hot loop {total} instructions ({common})"

    def to_dict(self) -> dict[str, Any]:
        found = dataclasses.asdict(self)
        found["hot_loop"] = None if self.hot_loop is None else dict(self.hot_loop)
        return found


def cuda_ptx(launch: KernelLaunch, dtype: np.dtype[Any], arch: str) -> str:
    """The PTX of a launch's CUDA file as the CUDA backend builds it for ``dtype``
    (``cubins.family_cubin``: its template instances, ``extern "C"`` around a file that
    does not say it, its folders' headers), by nvcc for ``arch``."""
    family, options = launch.family, launch.options
    path, source = read_kernel(family, "cuda", STAMP in options)
    text, as_it_is = cuda_text(source, instances(family, dtype.name))
    text = text if as_it_is else f'extern "C" {{\n{text}\n}}\n'
    folders = tuple(f"-I{folder}" for folder in include_folders(family, "cuda"))
    return _nvcc_ptx(path.name, text, (*folders, *options), arch)


@functools.lru_cache(maxsize=64)
def _nvcc_ptx(name: str, text: str, options: tuple[str, ...], arch: str) -> str:
    """The PTX nvcc builds of ``text`` (a file ``name``), kept for the process by what
    goes into it (an audit meets one build under several configurations: mm and bmm)."""
    nvcc = cuda_tool("nvcc")
    if nvcc is None:
        raise XBackendError("no nvcc here to build the CUDA kernel's PTX")
    with tempfile.TemporaryDirectory(prefix="xbackend-ptx-") as work:
        copy, ptx = Path(work) / name, Path(work) / "built.ptx"
        copy.write_text(text, encoding="utf-8")
        _run([nvcc, "-ptx", f"-arch={arch}", *options, str(copy), "-o", str(ptx)])
        return ptx.read_text(encoding="utf-8", errors="replace")


@functools.lru_cache(maxsize=64)
def read(ptx: str, function: str, arch: str) -> MachineCode:
    """``function`` of ``ptx`` (its name, or a template's: ``mm<float>``) assembled by
    ptxas for ``arch`` (``sm_90``), with its hot loop where nvdisasm is installed; kept
    for the process by what goes into it."""
    ptxas = cuda_tool("ptxas")
    if ptxas is None:
        raise XBackendError("no ptxas here to read the kernels' machine code")
    entry = _entry(ptx, function)
    with tempfile.TemporaryDirectory(prefix="xbackend-sass-") as work:
        source, cubin = Path(work) / "kernel.ptx", Path(work) / "kernel.cubin"
        source.write_text(ptx, encoding="utf-8")
        log = _run([ptxas, f"-arch={arch}", "-v", "-e", entry, str(source), "-o", str(cubin)])
        used = _resources(log, entry)
        disassembler = cuda_tool("nvdisasm")
        if disassembler is not None:
            used["hot_loop"] = hot_loop(_run([disassembler, "-c", str(cubin)]))
    return MachineCode(**used)


def _run(command: list[str]) -> str:
    """A tool's output (stdout and stderr: ptxas says what it used on stderr), or an
    ``XBackendError`` with its first lines."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise XBackendError(f"{Path(command[0]).name} could not run: {error}") from error
    if done.returncode != 0:
        said = " ".join((done.stderr or done.stdout).split())[:300]
        raise XBackendError(f"{Path(command[0]).name} failed: {said}")
    return done.stdout + done.stderr


def _entry(ptx: str, function: str) -> str:
    """The name ``function`` has in ``ptx``: itself, or the symbol C++ mangled it to."""
    entries: list[str] = re.findall(r"\.entry\s+([\w$]+)\s*\(", ptx)
    name = function.partition("<")[0].strip()
    for found in entries:
        if found == name or found.startswith(f"_Z{len(name)}{name}"):
            return found
    raise XBackendError(f"the PTX holds no kernel {function} (it holds {', '.join(entries)})")


def _resources(log: str, entry: str) -> dict[str, Any]:
    """What ``ptxas -v`` said ``entry`` uses."""
    part = log.partition(f"entry function '{entry}'")[2].partition("Compiling entry")[0]

    def number(pattern: str) -> int:
        found = re.search(pattern, part)
        return int(found.group(1)) if found else 0

    if not re.search(r"Used \d+ registers", part):
        raise XBackendError(f"ptxas did not say what {entry} uses")
    return {
        "registers": number(r"Used (\d+) registers"),
        "shared_bytes": number(r"(\d+) bytes smem"),
        "stack_bytes": number(r"(\d+) bytes stack frame"),
        "spill_stores": number(r"(\d+) bytes spill stores"),
        "spill_loads": number(r"(\d+) bytes spill loads"),
    }


_INSTRUCTION = re.compile(r"/\*([0-9a-f]+)\*/\s+(?:@!?U?P[T\d]+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")
_LABEL = re.compile(r"^\s*(\.L_x_\d+):")
_TARGET = re.compile(r"`\((\.L_x_\d+)\)")


def _arithmetic(mnemonic: str) -> bool:
    base, *parts = mnemonic.split(".")
    return base in _ARITHMETIC and not _NOT_ARITHMETIC.intersection(parts)


def hot_loop(sass: str) -> tuple[tuple[str, int], ...]:
    """The instructions of the hot loop of nvdisasm's listing of one kernel, most frequent
    first: of its innermost loops (a backward branch's span holding no other), the one
    with the most arithmetic; the whole listing where it has no loop."""
    code: list[str] = []  # each instruction's mnemonic, in order
    labels: dict[str, int] = {}  # a label: the index of the instruction it marks
    loops = []
    for line in sass.splitlines():
        label = _LABEL.match(line)
        if label:
            labels[label.group(1)] = len(code)
            continue
        found = _INSTRUCTION.search(line)
        if not found:
            continue
        target = _TARGET.search(found.group(3))
        if found.group(2).startswith("BRA") and target and target.group(1) in labels:
            loops.append((labels[target.group(1)], len(code)))  # a branch back: a loop
        code.append(found.group(2))
    innermost = [(a, b) for a, b in loops
                 if not any((a, b) != (c, d) and a <= c and d <= b for c, d in loops)]  # fmt: skip
    if innermost:
        start, end = max(
            innermost, key=lambda span: sum(map(_arithmetic, code[span[0] : span[1] + 1]))
        )
        code = code[start : end + 1]
    return tuple(collections.Counter(code).most_common())


def differences(
    function: str, first: tuple[str, MachineCode], second: tuple[str, MachineCode]
) -> str:
    """What the two builds of ``function`` share and where they differ, in one line."""
    (a, one), (b, other) = first, second
    if one == other:
        loop = "" if one.hot_loop is None else f"; the same {one.loop()}"
        return f"{function}: the same machine code ({one.resources()}{loop})"
    parts = []
    if one.resources() != other.resources():
        parts.append(f"{one.resources()} in {a}, {other.resources()} in {b}")
    if one.hot_loop != other.hot_loop and None not in (one.hot_loop, other.hot_loop):
        apart = _apart(dict(one.hot_loop or ()), dict(other.hot_loop or ()))
        parts.append(f"{one.loop()} in {a}, {other.loop()} in {b}; apart: {apart}")
    return f"{function} compiled apart: {'; '.join(parts)}"


def _apart(one: dict[str, int], other: dict[str, int]) -> str:
    """The instructions two hot loops count differently, the largest differences first."""
    names = sorted(set(one) | set(other), key=lambda n: -abs(one.get(n, 0) - other.get(n, 0)))
    moved = [f"{n} {one.get(n, 0)}/{other.get(n, 0)}" for n in names if one.get(n) != other.get(n)]
    return ", ".join(moved[:5])
