"""Does the slab address cost warp_async? (issue 43; a record, not a tool)

``warp_async`` built from the kernel files of an earlier commit (REV) against the working
tree's, interleaved on one GPU, each product checked against float64 first: four rounds of
ten samples of each, a share the ratio of their medians with a seeded bootstrap 95% interval
(``xbackend diff``'s). ``--moved`` adds, for NVIDIA's OpenCL, the working tree's PTX with
every ``mov.u64 %rd, mm_warp_$_As`` (and ``_Bs``) replaced by a register set once at the
kernel's entry, loaded as a program binary: what the kernel would run if its compiler kept
the shared arrays' address out of the loop. docs/notebook/performance.md, "The slab
address, made once", has the runs (docs/results/h200/vendor/async_regression.txt).

    PYTHONPATH=. python studies/async_address.py REV [--moved] [--sizes 4096x4096x4096]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import types
from importlib import import_module

import numpy as np

import xbackend
from xbackend.analysis.diff import ratio_interval
from xbackend.problems import make_operands
from xbackend.sweep.sizes import parse_shapes

kernels = import_module("xbackend.launches.kernels")
CONFIGS = {
    "64x128x16 8x8 s3 (the default)": {"BM": 64, "BN": 128, "BK": 16, "WM": 32, "WN": 64,
                                       "TM": 8, "TN": 8, "stages": 3},
    "64x64x16 8x4 s4": {"BM": 64, "BN": 64, "BK": 16, "WM": 32, "WN": 32, "TM": 8, "TN": 4,
                        "stages": 4},
    "256x128x8 16x8 s3 (cuBLAS's)": {"BM": 256, "BN": 128, "BK": 8, "WM": 64, "WN": 64,
                                     "TM": 16, "TN": 8, "stages": 3},
}  # fmt: skip
EXTENSION = {"cuda": "cu", "opencl": "cl"}
MOV = re.compile(r"\s*mov\.u64\s+(%rd\d+), mm_warp_\$_(As|Bs);")


def moved(ptx: str) -> str:
    """The PTX with each mov of a shared array's address from a register set at entry."""
    lines = [MOV.sub(r"\tmov.u64 \t\1, %kept_\2;", line) for line in ptx.split("\n")]
    first = next(i for i, line in enumerate(lines) if line.strip().startswith(".reg .b64"))
    lines[first + 1 : first + 1] = ["\t.reg .b64 %kept_As, %kept_Bs;"]
    declared = (".reg", ".shared", "//")
    body = next(i for i in range(first + 2, len(lines))
                if lines[i].strip() and not lines[i].strip().startswith(declared))  # fmt: skip
    lines[body:body] = [
        "\tmov.u64 \t%kept_As, mm_warp_$_As;",
        "\tmov.u64 \t%kept_Bs, mm_warp_$_Bs;",
    ]
    return "\n".join(lines)


def with_moved_addresses(backend) -> None:
    """Build this OpenCL backend's mm_warp as usual, then again from its moved PTX."""
    import pyopencl as cl

    build = backend._build

    def rebuilt(self, family, options, dtype):
        program = build(family, options, dtype)
        if family != "mm_warp":
            return program
        ptx = bytes(program.get_info(cl.program_info.BINARIES)[0]).rstrip(b"\0").decode()
        return cl.Program(self._context, [self._cl_device], [moved(ptx).encode()]).build()

    backend._build = types.MethodType(rebuilt, backend)


def measure(language, earlier, backend, A, B, params):
    """One turn of samples; with ``earlier`` (a kernel file's text) built from it."""
    module = import_module(f"xbackend.backends.{language}")
    read = getattr(module, "read_kernel")  # noqa: B009 - set back below
    if earlier is not None:

        def read_earlier(family, lang, stamped=False):
            path, text = read(family, lang, stamped)
            if family != "mm_warp":
                return path, text
            return path, kernels.with_hooks(earlier) if stamped else earlier

        setattr(module, "read_kernel", read_earlier)  # noqa: B010
    try:
        return backend.measure(A, B, "warp_async", params=params, warmup=1, samples=10,
                               min_samples=10)  # fmt: skip
    finally:
        setattr(module, "read_kernel", read)  # noqa: B010


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rev", help="the commit whose kernel files came before")
    parser.add_argument("--moved", action="store_true", help="add OpenCL's moved PTX")
    parser.add_argument("--sizes", type=parse_shapes, default=parse_shapes("4096x4096x4096"))
    args = parser.parse_args()
    for shape in args.sizes:
        A, B = make_operands(shape, 0, np.dtype("float32"))
        reference = A.astype(np.float64) @ B.astype(np.float64)
        for language, device in (("cuda", None), ("opencl", "nvidia")):
            earlier = subprocess.run(
                ["git", "show", f"{args.rev}:kernels/mm_warp/mm_warp.{EXTENSION[language]}"],
                check=True, capture_output=True, text=True).stdout  # fmt: skip
            kinds = {"before": earlier, "now": None}
            if args.moved and language == "opencl":
                kinds["moved"] = None
            backends = {kind: xbackend.get_backend(language, device) for kind in kinds}
            if "moved" in backends:
                with_moved_addresses(backends["moved"])
            for name, params in CONFIGS.items():
                times: dict[str, list[float]] = {kind: [] for kind in kinds}
                for turn in range(4):
                    for kind, backend in backends.items():
                        m = measure(language, kinds[kind], backend, A, B, params)
                        if turn == 0:
                            error = np.max(np.abs(m.result - reference)) / np.max(np.abs(reference))
                            if not error < 1e-4:
                                print(f"{shape} {language} {name} {kind}: WRONG ({error:.1e})")
                                return 1
                        times[kind] += list(m.kept[0])
                work = 2 * shape.M * shape.N * shape.K
                line = [f"{shape} {language} {name}:"]
                line += [f"{kind} {work / statistics.median(t) / 1e12:.2f} TFLOP/s"
                         for kind, t in times.items()]  # fmt: skip
                for kind in kinds:
                    if kind != "before":
                        share = ratio_interval(times[kind], times["before"])
                        interval = f"[{share.low:.1%}–{share.high:.1%}]"
                        line.append(f"{kind}/before {share.ratio:.1%} {interval}")
                print("; ".join(line), flush=True)
            for backend in backends.values():
                backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
