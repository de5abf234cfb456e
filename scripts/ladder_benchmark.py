"""The kernel ladder against the vendor BLAS: every mm variant of CUDA and OpenCL, timed.

    python scripts/ladder_benchmark.py                      # on a GPU machine
    python scripts/ladder_benchmark.py --backends opencl --sizes 64x64   # anywhere

For each size, each backend's every mm variant (at each of its tiles; the tuned
variants at the parameters they choose for the size, from ``xbackend tune``'s cache
or their size-aware default) computes the product once against the float64 check,
then is timed (median kernel time, device events). The ``vendor`` variants (cuBLAS,
CLBlast where installed) run the same way. The first table printed gives TFLOP/s
and the ratio to cuBLAS (the CUDA backend's vendor line, else PyTorch's matmul with
TF32 off), CUDA and OpenCL side by side. A second table does the same for the
reduced product (rmm): its variants on the top rung against the CUDA backend's
rmm vendor line, the pair sums by a kernel and then cuBLAS on the half-size
product. A wrong result prints WRONG instead of a speed, and makes the exit
status 1.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import xbackend
from xbackend.problems import Reference, check, flops, make_operands
from xbackend.runner import Target
from xbackend.sweep import parse_shapes

# The targets of issue 4, and the awkward shapes where no cliff may appear.
DEFAULT_SIZES = "4096x4096x4096,8000x7000x8000,4095x4095x4095,1000x3001x1000"
# The reduced product against the pair sums + cuBLAS on the half-size product.
DEFAULT_RMM_VARIANTS = "tiled,vec4_db,warp_db"


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
    times: list[float] = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.matmul(dA, dB)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    return statistics.median(times)


def _configurations(backend, op: str) -> list[tuple[str, int | None]]:
    """(variant, tile) pairs: every tile of the fixed variants, the tuned ones' own choice."""
    pairs: list[tuple[str, int | None]] = []
    for variant in backend.variants(op):
        spec = backend.variant_spec(variant, op)
        if spec.tuned or not spec.takes_tile:
            pairs.append((variant, None))
        else:
            pairs.extend((variant, tile) for tile in backend.tiles(variant, op))
    return pairs


class Ladder:
    """The measured cells of one operation: (size, variant, tile) -> backend -> text."""

    def __init__(self, op: str, labels: list[str]):
        self.op, self.labels = op, labels
        self.cells: dict[tuple[str, str, str], dict[str, str]] = {}
        self.wrong = False
        # (size, label) -> TFLOP/s of that backend's own vendor line (CLBlast for OpenCL)
        self.own_vendor: dict[tuple[str, str], float] = {}

    def measure(self, shape, A, B, opened, wanted: set[str] | None, repeat: int) -> float | None:
        """Every variant of every backend on A and B; the CUDA vendor line's TFLOP/s."""
        reference = Reference.of(A, B, self.op)
        work = flops(self.op, shape)
        vendor = None
        for label, backend in opened:
            if self.op not in backend.VARIANTS:
                continue
            for variant, tile in _configurations(backend, self.op):
                if wanted and variant not in wanted and variant != "vendor":
                    continue
                try:
                    measured = backend.measure(
                        A, B, variant, tile, op=self.op, samples=repeat, min_samples=repeat
                    )
                except xbackend.XBackendError as error:
                    print(f"  {label} {self.op} {variant}: not run: {str(error).splitlines()[0]}")
                    continue
                equal = all(
                    check(output, reference).equal
                    for output in (measured.result, measured.last_result)
                )
                tflops = work / statistics.median(measured.kernel_s) / 1e12
                tuned = backend.variant_spec(variant, self.op).tuned
                key = (str(shape), variant, "tuned" if tuned else str(tile or "—"))
                cell = f"{tflops:.2f}" if equal else "WRONG"
                self.wrong |= not equal
                self.cells.setdefault(key, {})[label] = cell
                chosen = f" {measured.params}" if measured.params else ""
                print(
                    f"  {label} {self.op} {variant} T={measured.tile}: {cell} TFLOP/s{chosen}",
                    flush=True,
                )
                if variant == "vendor" and equal:
                    self.own_vendor[(str(shape), label)] = tflops
                    if backend.name == "cuda":
                        vendor = tflops
        return vendor

    def add_ratios(self, shape, reference_tflops: float | None) -> None:
        for key, cells in self.cells.items():
            if key[0] != str(shape):
                continue
            for label in self.labels:
                value = cells.get(label, "—")
                ratio = "—"
                if reference_tflops and value not in ("—", "WRONG"):
                    ratio = f"{float(value) / reference_tflops:.1%}"
                cells[f"{label}%"] = ratio
                own = self.own_vendor.get((key[0], label))
                if own and label not in self._cuda_labels() and value not in ("—", "WRONG"):
                    cells[f"{label}%own"] = f"{float(value) / own:.1%}"

    def _cuda_labels(self) -> set[str]:
        return {label for label in self.labels if label.split(":")[0] == "cuda"}

    def _own_columns(self) -> list[str]:
        """The labels whose own vendor line (CLBlast) ran: they get a second ratio."""
        ran = {label for _, label in self.own_vendor}
        return [label for label in self.labels if label in ran - self._cuda_labels()]

    def print_table(self, reference_name: str) -> None:
        header = ["size", "variant", "tile"]
        own = self._own_columns()
        for label in self.labels:
            header += [f"{label} TFLOP/s", f"of {reference_name}"]
            header += ["of CLBlast"] if label in own else []
        rows = [header]
        for (size, variant, tile), cells in self.cells.items():
            row = [size, variant, tile]
            for label in self.labels:
                row += [cells.get(label, "—"), cells.get(f"{label}%", "—")]
                row += [cells.get(f"{label}%own", "—")] if label in own else []
            rows.append(row)
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        rows.insert(1, ["-" * width for width in widths])
        for row in rows:
            print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="cuda,opencl", help="NAME or NAME:DEVICE list")
    parser.add_argument("--sizes", type=parse_shapes, default=parse_shapes(DEFAULT_SIZES))
    parser.add_argument(
        "--rmm-sizes",
        type=parse_shapes,
        default=None,
        help="sizes of the reduced product's table, M and N even (default: those of "
        "--sizes with M and N even)",
    )
    parser.add_argument("--repeat", type=int, default=10, help="timed samples per point")
    parser.add_argument("--variants", default=None, help="only these mm variants (comma list)")
    parser.add_argument(
        "--rmm-variants",
        default=DEFAULT_RMM_VARIANTS,
        help="rmm variants to time (comma list; the vendor line always runs)",
    )
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
    labels = [label for label, _ in opened]
    mm = Ladder("mm", labels)
    wanted = set(args.variants.split(",")) if args.variants else None
    for shape in args.sizes:
        A, B = make_operands(shape, seed=7)
        vendor_tflops = mm.measure(shape, A, B, opened, wanted, args.repeat)
        # PyTorch reaches cuBLAS through its own calls: printed too, for reference.
        seconds = torch_seconds(A, B, args.repeat)
        torch_tflops = shape.flops / seconds / 1e12 if seconds else None
        if torch_tflops:
            print(f"{shape}: torch.matmul {torch_tflops:.2f} TFLOP/s (TF32 off)", flush=True)
        source = "the cuda vendor line"
        if vendor_tflops is None:
            vendor_tflops, source = torch_tflops, "torch.matmul"
        if vendor_tflops:
            print(f"{shape}: cuBLAS {vendor_tflops:.2f} TFLOP/s ({source})", flush=True)
        mm.add_ratios(shape, vendor_tflops)
    print()
    mm.print_table("cuBLAS")
    print(flush=True)
    rmm = Ladder("rmm", labels)
    wanted_rmm = set(args.rmm_variants.split(",")) if args.rmm_variants else None
    rmm_sizes = args.rmm_sizes
    if rmm_sizes is None:
        rmm_sizes = [shape for shape in args.sizes if shape.M % 2 == 0 and shape.N % 2 == 0]
    for shape in rmm_sizes:
        A, B = make_operands(shape, seed=7)
        vendor_tflops = rmm.measure(shape, A, B, opened, wanted_rmm, args.repeat)
        if vendor_tflops:
            print(f"{shape}: pair sums + cuBLAS {vendor_tflops:.2f} TFLOP/s", flush=True)
        rmm.add_ratios(shape, vendor_tflops)
    for _, backend in opened:
        backend.close()
    if rmm.cells:
        print("\nThe reduced product (rmm), TFLOP/s of its half-size product:")
        rmm.print_table("sums+cuBLAS")
    return 1 if mm.wrong or rmm.wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
