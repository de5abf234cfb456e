"""A kernel's CUDA and OpenCL twins as the GPU runs them: each built as xbackend builds it
(nvcc for the .cu; NVIDIA's OpenCL compiler for the .cl, whose PTX ptxas assembles), then
disassembled (cuobjdump -sass), with the instruction mix of every loop and the registers
of each: the measured difference between two spans starts here (docs/notebook/measurement.md).

    python3 studies/twin_sass.py mm mm_tiled OUT [-DTILE=16 -DREAL=float ...]

Needs nvcc, ptxas and cuobjdump, and NVIDIA's OpenCL (a GPU machine).
"""

from __future__ import annotations

import collections
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _cubin_of_cuda(family: str, options: list[str], out: Path) -> Path:
    cubin = out / f"{family}.cuda.cubin"
    subprocess.run(
        ["nvcc", "-cubin", "-arch=sm_90", *options, "-I", str(ROOT / "kernels" / "cuda"),
         str(ROOT / "kernels" / family / f"{family}.cu"), "-o", str(cubin)],
        check=True,
    )  # fmt: skip
    return cubin


def _cubin_of_opencl(family: str, options: list[str], out: Path) -> Path:
    import pyopencl as cl

    platform = next(p for p in cl.get_platforms() if "NVIDIA" in p.name)
    context = cl.Context(platform.get_devices())
    source = (ROOT / "kernels" / family / f"{family}.cl").read_text()
    built = cl.Program(context, source).build(
        options=[*options, "-I", str(ROOT / "kernels" / "opencl")]
    )
    ptx = out / f"{family}.opencl.ptx"
    ptx.write_bytes(built.binaries[0].rstrip(b"\x00"))  # NUL-terminated
    cubin = out / f"{family}.opencl.cubin"
    subprocess.run(["ptxas", "-arch=sm_90", str(ptx), "-o", str(cubin)], check=True)
    return cubin


def loops(cubin: Path, kernel: str) -> list[tuple[int, collections.Counter[str]]]:
    """Each backward branch's loop of ``kernel``: its length and its instruction mix."""
    sass = subprocess.run(["cuobjdump", "-sass", str(cubin)], capture_output=True,
                          text=True, check=True).stdout  # fmt: skip
    start = sass.index(f"Function : {kernel}\n")
    end = sass.find("Function : ", start + 10)
    code = [
        (int(m.group(1), 16), m.group(2))
        for m in re.finditer(
            r"/\*([0-9a-f]{4})\*/\s+(.*?)\s*;", sass[start : end if end > 0 else None]
        )
    ]
    found = []
    for address, instruction in code:
        target = re.search(r"BRA (0x[0-9a-f]+)", instruction)
        if target and int(target.group(1), 16) < address:
            body = [i for a, i in code if int(target.group(1), 16) <= a <= address]
            opcodes = [i.split()[1] if i.startswith("@") else i.split()[0] for i in body]
            found.append((len(body), collections.Counter(o.split(".")[0] for o in opcodes)))
    return found


def main() -> int:
    family, kernel, out, *options = sys.argv[1:]
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    for language, build in (("cuda", _cubin_of_cuda), ("opencl", _cubin_of_opencl)):
        cubin = build(family, options, folder)
        usage = subprocess.run(["cuobjdump", "-res-usage", str(cubin)], capture_output=True,
                               text=True).stdout  # fmt: skip
        registers = re.search(rf"Function {kernel}:\s*\n\s*REG:(\d+)", usage)
        print(f"{language}: {kernel}, {registers.group(1) if registers else '?'} registers")
        for length, mix in loops(cubin, kernel):
            print(f"  loop of {length}: " + ", ".join(f"{op} {n}" for op, n in mix.most_common(9)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
