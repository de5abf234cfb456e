"""The kernel ladder against cuBLAS: every mm variant of CUDA and OpenCL, verified and timed.

    python scripts/ladder_benchmark.py                      # on a GPU machine
    python scripts/ladder_benchmark.py --backends opencl --sizes 64x64   # anywhere

For each size, each backend's every mm variant at each of its tiles computes the
product once against the float64 check, then is timed (median kernel time, device
events). cuBLAS (PyTorch, TF32 off) is timed beside them when PyTorch sees a GPU.
The table printed last gives TFLOP/s and the ratio to cuBLAS, CUDA and OpenCL side
by side. A variant whose result is wrong prints WRONG instead of a speed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import xbackend
from xbackend.problems import Reference, Shape, check, make_operands
from xbackend.runner import Target
from xbackend.sweep import parse_shapes

# The targets of issue 4, and the awkward shapes where no cliff may appear.
DEFAULT_SIZES = "4096x4096x4096,8000x7000x8000,4095x4095x4095,1000x3001x1000"


def cublas_seconds(shape: Shape, A, B, repeat: int) -> float | None:
    """Median time of torch.matmul on the GPU (cuBLAS SGEMM, TF32 off), or None."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    dA, dB = torch.from_numpy(A).cuda(), torch.from_numpy(B).cuda()
    for _ in range(3):
        torch.matmul(dA, dB)
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.matmul(dA, dB)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="cuda,opencl", help="NAME or NAME:DEVICE list")
    parser.add_argument("--sizes", type=parse_shapes, default=parse_shapes(DEFAULT_SIZES))
    parser.add_argument("--repeat", type=int, default=10, help="timed samples per point")
    args = parser.parse_args()
    opened = []
    for text in args.backends.split(","):
        target = Target.parse(text)
        try:
            opened.append((target.label, xbackend.get_backend(target.name, target.device)))
        except xbackend.BackendUnavailable as error:
            print(f"skipping {target.label}: {error.reason}")
    if not opened:
        print("no backend to benchmark", file=sys.stderr)
        return 2
    rows = []
    for shape in args.sizes:
        A, B = make_operands(shape, seed=7)
        reference = Reference.of(A, B)
        vendor_s = cublas_seconds(shape, A, B, args.repeat)
        vendor = f"{shape.flops / vendor_s / 1e12:.2f}" if vendor_s else "—"
        print(f"{shape}: cuBLAS {vendor} TFLOP/s" if vendor_s else f"{shape}: cuBLAS not here")
        for label, backend in opened:
            for variant in backend.variants("mm"):
                for tile in backend.tiles(variant) or (None,):
                    measured = backend.measure(
                        A, B, variant, tile, samples=args.repeat, min_samples=args.repeat
                    )
                    verdict = check(measured.result, reference)
                    seconds = statistics.median(measured.kernel_s)
                    tflops = shape.flops / seconds / 1e12
                    ratio = f"{tflops / (shape.flops / vendor_s / 1e12):.1%}" if vendor_s else "—"
                    speed = f"{tflops:.2f}" if verdict.equal else "WRONG"
                    rows.append((str(shape), label, variant, str(tile), speed, ratio))
                    print(f"  {label} {variant} T={tile}: {speed} TFLOP/s ({ratio} of cuBLAS)")
    for _, backend in opened:
        backend.close()
    header = ("size", "backend", "variant", "tile", "TFLOP/s", "of cuBLAS")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    print()
    for row in [header, tuple("-" * w for w in widths), *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
    return 1 if any(row[4] == "WRONG" for row in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
