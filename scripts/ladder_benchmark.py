"""The kernel ladder against the vendor BLAS: every mm variant of CUDA and OpenCL, timed.

    python scripts/ladder_benchmark.py                      # on a GPU machine
    python scripts/ladder_benchmark.py --backends opencl --sizes 64x64   # anywhere

For each size, each backend's every mm variant (at each of its tiles; the tuned
variants at the parameters they choose for the size, from ``xbackend tune``'s cache
or their size-aware default) computes the product once against the float64 check,
then is timed (median kernel time, device events). The ``vendor`` variants (cuBLAS,
CLBlast where installed) run the same way. The table printed last gives TFLOP/s
and the ratio to cuBLAS (the CUDA backend's vendor line, else PyTorch's matmul with
TF32 off), CUDA and OpenCL side by side. A wrong result prints WRONG instead of a
speed, and makes the exit status 1.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import xbackend
from xbackend.problems import Reference, check, make_operands
from xbackend.runner import Target
from xbackend.sweep import parse_shapes

# The targets of issue 4, and the awkward shapes where no cliff may appear.
DEFAULT_SIZES = "4096x4096x4096,8000x7000x8000,4095x4095x4095,1000x3001x1000"


def torch_seconds(A, B, repeat: int) -> float | None:
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


def _configurations(backend) -> list[tuple[str, int | None]]:
    """(variant, tile) pairs: every tile of the fixed variants, the tuned ones' own choice."""
    pairs: list[tuple[str, int | None]] = []
    for variant in backend.variants("mm"):
        spec = backend.variant_spec(variant)
        if spec.tuned or not spec.takes_tile:
            pairs.append((variant, None))
        else:
            pairs.extend((variant, tile) for tile in backend.tiles(variant))
    return pairs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="cuda,opencl", help="NAME or NAME:DEVICE list")
    parser.add_argument("--sizes", type=parse_shapes, default=parse_shapes(DEFAULT_SIZES))
    parser.add_argument("--repeat", type=int, default=10, help="timed samples per point")
    parser.add_argument("--variants", default=None, help="only these variants (comma list)")
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
    wanted = set(args.variants.split(",")) if args.variants else None
    labels = [label for label, _ in opened]
    speeds: dict[tuple[str, str, str], dict[str, str]] = {}  # (size, variant, tile) -> cells
    wrong = False
    for shape in args.sizes:
        A, B = make_operands(shape, seed=7)
        reference = Reference.of(A, B)
        vendor_tflops = None
        measured_here: dict[tuple[str, str], float] = {}
        for label, backend in opened:
            for variant, tile in _configurations(backend):
                if wanted and variant not in wanted and variant != "vendor":
                    continue
                try:
                    measured = backend.measure(
                        A, B, variant, tile, samples=args.repeat, min_samples=args.repeat
                    )
                except xbackend.XBackendError as error:
                    print(f"  {label} {variant}: not run: {str(error).splitlines()[0]}")
                    continue
                verdict = check(measured.result, reference)
                last = check(measured.last_result, reference)
                tflops = shape.flops / statistics.median(measured.kernel_s) / 1e12
                shown_tile = "tuned" if backend.variant_spec(variant).tuned else str(tile or "—")
                key = (str(shape), variant, shown_tile)
                if verdict.equal and last.equal:
                    measured_here[label, variant] = tflops
                    cell = f"{tflops:.2f}"
                else:
                    wrong, cell = True, "WRONG"
                speeds.setdefault(key, {})[label] = cell
                chosen = f" {measured.params}" if measured.params else ""
                print(f"  {label} {variant} T={measured.tile}: {cell} TFLOP/s{chosen}", flush=True)
                if variant == "vendor" and backend.name == "cuda" and verdict.equal:
                    vendor_tflops = tflops
        # PyTorch reaches cuBLAS through its own calls (cuBLASLt, a workspace), which
        # can pick other kernels than a plain cublasSgemm: print it too, for reference.
        seconds = torch_seconds(A, B, args.repeat)
        torch_tflops = shape.flops / seconds / 1e12 if seconds else None
        if torch_tflops:
            print(f"{shape}: torch.matmul {torch_tflops:.2f} TFLOP/s (TF32 off)", flush=True)
        source = "the cuda vendor line"
        if vendor_tflops is None:
            vendor_tflops, source = torch_tflops, "torch.matmul"
        if vendor_tflops:
            print(f"{shape}: cuBLAS {vendor_tflops:.2f} TFLOP/s ({source})", flush=True)
        for key, cells in speeds.items():
            if key[0] != str(shape):
                continue
            for label in labels:
                value = cells.get(label, "—")
                ratio = "—"
                if vendor_tflops and value not in ("—", "WRONG"):
                    ratio = f"{float(value) / vendor_tflops:.1%}"
                cells[f"{label}%"] = ratio
    for _, backend in opened:
        backend.close()
    header = ["size", "variant", "tile"]
    for label in labels:
        header += [f"{label} TFLOP/s", "of cuBLAS"]
    rows = [header]
    for (size, variant, tile), cells in speeds.items():
        row = [size, variant, tile]
        for label in labels:
            row += [cells.get(label, "—"), cells.get(f"{label}%", "—")]
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    print()
    rows.insert(1, ["-" * width for width in widths])
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
