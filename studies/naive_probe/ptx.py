"""The PTX NVIDIA's OpenCL compiler makes of two probes' hot loops, side by side
(studies/gpu_naive_probe.sh): ``python3 studies/naive_probe/ptx.py OUT``."""

import sys
from pathlib import Path

import pyopencl as cl

platform = next(p for p in cl.get_platforms() if "NVIDIA" in p.name)
context = cl.Context(platform.get_devices())
folder = Path(__file__).parent
source = (folder / "naive_probe.cl").read_text()
options = ["-DTILE=16", "-DREAL=float", "-I", str(folder.parent.parent / "kernels" / "opencl")]
program = cl.Program(context, source).build(options=options)
ptx = program.binaries[0].rstrip(b"\x00").decode(errors="replace")  # NUL-terminated
out = Path(sys.argv[1])
(out / "naive_probe.ptx").write_text(ptx)
for name in ("probe_same", "probe_no_batch", "probe_batch_int", "probe_batch_after"):
    start = ptx.index(f".entry {name}(")
    body = ptx[start : ptx.index("\n}\n", start)]
    print(
        f"{name}: {body.count(chr(10))} lines, {body.count('ld.global')} global loads, "
        f"{body.count('mul.wide')} mul.wide, {body.count('fma.rn.f32')} fma"
    )
