"""cuBLAS SGEMM through PyTorch (TF32 off): the vendor reference beside the classic kernels.

    python studies/cublas_reference.py --sizes 4096x4096

Times ``torch.matmul`` on float32 CUDA tensors with CUDA events (median of the timed
repeats after warm-up), checks a block of rows against a float64 reference with
xbackend's check, and prints TFLOP/s. Prints "skipped: ..." and exits 0 where there is
no CUDA PyTorch, so it can run anywhere.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from xbackend.problems import Reference, check, make_operands
from xbackend.sweep.sizes import parse_shapes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=parse_shapes, default=parse_shapes("4096x4096"))
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("skipped: PyTorch is not installed")
        return 0
    if not torch.cuda.is_available():
        print("skipped: PyTorch sees no CUDA device")
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, TF32 off")
    for shape in args.sizes:
        A, B = make_operands(shape, seed=0)
        dA, dB = torch.from_numpy(A).cuda(), torch.from_numpy(B).cuda()
        for _ in range(3):
            C = torch.matmul(dA, dB)
        times_s = []
        for _ in range(args.repeat):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            C = torch.matmul(dA, dB)
            end.record()
            end.synchronize()
            times_s.append(start.elapsed_time(end) * 1e-3)
        rows = min(shape.M, 256)
        verdict = check(C[:rows].cpu().numpy(), Reference.of(A[:rows], B))
        median_s = statistics.median(times_s)
        print(
            f"cuBLAS {shape}: median {median_s * 1e3:.3f} ms over {args.repeat}, "
            f"{shape.flops / median_s / 1e12:.2f} TFLOP/s, code equality ({rows} rows): "
            f"{verdict.equal} ({verdict.bound_ratio:.2g} of tolerance)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
