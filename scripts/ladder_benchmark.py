"""The kernel ladder against the vendor BLAS: every mm variant of CUDA and OpenCL, each
timed beside the vendor line it is compared with.

    python scripts/ladder_benchmark.py                      # on a GPU machine
    python scripts/ladder_benchmark.py --backends opencl --sizes 64x64   # anywhere

For each size, each backend's every mm variant (at each of its tiles; the tuned
variants at the parameters they choose for the size, from ``xbackend tune``'s cache
or their size-aware default) computes the product once against the float64 check.
Each rung is timed interleaved with the vendor lines it is compared with: vendor,
rung, vendor, rung, ... in ``--rounds`` rounds of ``--repeat`` samples (median kernel
time, device events), so that both meet the device in the same state (clocks,
temperature, what else runs). The vendor lines: cuBLAS (the CUDA backend's vendor
variant) for every backend's rungs where the CUDA backend runs, and each other
backend's own (CLBlast for OpenCL where installed, NumPy's BLAS for the CPU). A share
is the rung's GFLOP/s over the vendor's, the ratio of their median times, printed
with its 95% interval: a seeded bootstrap of that ratio from both raw samples.

The first table gives TFLOP/s and the shares of cuBLAS and of the backend's own
vendor line, CUDA and OpenCL side by side. A second table does the same for the
reduced product (rmm): its variants on the top rung against the rmm vendor lines
(the pair sums by a kernel, then the vendor's GEMM on the half-size product). A
wrong result prints WRONG instead of a speed, and makes the exit status 1.

PyTorch's matmul is not a line of the tables (earlier versions printed it): it cannot be
interleaved under the same hold as the backends' vendor lines, and its plain CUDA events
read +66% at 1024³ against held events. cuBLAS is the CUDA backend's own vendor line.

Triton (where torch and triton import and a CUDA GPU is there; ``--no-triton`` leaves it
out) is a peer line, after the tables: ``kernels/triton/matmul.py``, float32 with TF32
off, autotuned over its configurations at each size, then timed interleaved with
cuBLAS called through torch (``torch.matmul``, TF32 off): cuBLAS, Triton, cuBLAS, ... in
the same rounds, each sample one call between two CUDA events after a warm call. Its
share of cuBLAS is the ratio of the two medians from the same clock, with its interval;
the rungs' shares in the tables come from the backends' held events.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import xbackend
import xbackend.tuning.cache as tune_cache
from xbackend.analysis.diff import ratio_interval
from xbackend.launches.geometries import per_product
from xbackend.measuring.timing import BOOTSTRAP_SEED
from xbackend.problems import Reference, check, flops, make_operands
from xbackend.sweep.runner import Target
from xbackend.sweep.sizes import parse_shapes

# The targets of issue 4, and the awkward shapes where no cliff may appear.
DEFAULT_SIZES = "4096x4096x4096,8000x7000x8000,4095x4095x4095,1000x3001x1000"
# The reduced product against the pair sums + cuBLAS on the half-size product.
DEFAULT_RMM_VARIANTS = "tiled,vec4_db,warp_db"
# Each backend's own vendor line, by the backend's name.
VENDOR_NAMES = {"cuda": "cuBLAS", "opencl": "CLBlast", "cpu": "NumPy BLAS"}
NOT_TIMED = "—"


def share_interval(
    rung_s: list[float], vendor_s: list[float], seed: int = BOOTSTRAP_SEED
) -> tuple[float, float, float]:
    """The rung's share of the vendor's speed (the vendor's median time over the
    rung's) and a percentile-bootstrap 95% interval of it: ``xbackend diff``'s ratio of
    medians, the vendor's over the rung's."""
    share = ratio_interval(rung_s, vendor_s, seed=seed)
    return share.ratio, share.low, share.high


def share_text(rung_s: list[float], vendor_s: list[float]) -> str:
    """A share with its interval, in one cell without double spaces: 89.8% [88.1–91.0]."""
    share, low, high = share_interval(rung_s, vendor_s)
    return f"{share:.1%} [{low * 100:.1f}–{high * 100:.1f}]"


@dataclasses.dataclass(frozen=True)
class Line:
    """One timed line: a backend's variant, at a tile."""

    label: str
    backend: Any
    variant: str
    tile: int | None = None
    # A tuned variant's choice: "tuned" (the tune cache, then the shipped database),
    # "untuned" (neither: the default derived from the device); None: as opened.
    choices: str | None = None

    def prepare(self) -> None:
        """Hand the backend this line's choices before it runs."""
        if self.choices is not None:
            tuned = self.choices == "tuned"
            self.backend.use_choices(tune_cache.cached_choices() if tuned else None)


@dataclasses.dataclass
class Timed:
    """A line's samples (kernel seconds) over the rounds, and what its first turn gave."""

    samples_s: list[float] = dataclasses.field(default_factory=list)
    equal: bool = True
    params: dict[str, int] | None = None
    tile: int | None = None
    # A vendor line's kernels, as its first turn's trace recorded them (measuring/launched.py).
    kernels: Any = None


def launched_text(found: Any) -> str:
    """A vendor line's kernels, each with its grid, block and registers, or why none."""
    if not isinstance(found, list):
        return str(found or "nothing recorded")
    return "; ".join(
        f"{k['name']} (grid {'x'.join(map(str, k['grid']))}, block "
        f"{'x'.join(map(str, k['block']))}, {k['registers']} registers)"
        for k in found
    )


def interleaved(
    rung: Line, vendors: list[Line], A, B, op: str, rounds: int, repeat: int
) -> tuple[Timed, list[Timed]]:
    """Time ``rung`` and ``vendors`` in turns: each vendor, then the rung, ``rounds``
    times, ``repeat`` samples a turn; the rung's results are checked in its first turn."""
    timed_rung, timed_vendors = Timed(), [Timed() for _ in vendors]
    reference = Reference.of(A, B, op)
    for number in range(rounds):
        for line, timed in (*zip(vendors, timed_vendors, strict=True), (rung, timed_rung)):
            line.prepare()
            measured = line.backend.measure(
                A,
                B,
                line.variant,
                line.tile,
                op=op,
                warmup=1,
                samples=repeat,
                min_samples=repeat,
            )
            timed.samples_s.extend(measured.kept[0])  # without marked samples
            if number == 0:
                timed.kernels = (getattr(measured, "state", None) or {}).get("vendor_kernels")
            if number == 0 and line is rung:
                timed.equal = all(
                    check(output, reference).equal
                    for output in (measured.result, measured.last_result)
                )
                timed.params, timed.tile = measured.params, measured.tile
    return timed_rung, timed_vendors


def _configurations(backend, op: str, untuned: bool) -> list[tuple[str, int | None, str | None]]:
    """(variant, tile, choices): every tile of the fixed variants, the tuned ones' own
    choice (``untuned``: their derived default first, then their tuned choice)."""
    pairs: list[tuple[str, int | None, str | None]] = []
    for variant in backend.variants(op):
        spec = backend.variant_spec(variant, op)
        if per_product(spec):
            settings = ("untuned", "tuned") if untuned else (None,)
            pairs.extend((variant, None, setting) for setting in settings)
        elif not spec.takes_tile:
            pairs.append((variant, None, None))
        else:
            pairs.extend((variant, tile, None) for tile in backend.tiles(variant, op))
    return pairs


def _vendor_line(label: str, backend, op: str, dtype) -> Line | None:
    if op in backend.variant_table() and "vendor" in backend.runnable_variants(op, dtype):
        return Line(label, backend, "vendor")
    return None


class Ladder:
    """The measured cells of one operation: (size, variant, tile) -> column -> text."""

    def __init__(self, op: str, labels: list[str], reference_name: str, untuned: bool = False):
        self.op, self.labels, self.reference_name = op, labels, reference_name
        self.untuned = untuned
        self.cells: dict[tuple[str, str, str], dict[str, str]] = {}
        # (size, label, variant) -> choices -> (the rung's samples, the cuBLAS samples)
        self.settings: dict[tuple[str, str, str], dict[str, tuple[list[float], list[float]]]] = {}
        self.wrong = False
        self.own_names: dict[str, str] = {}  # label -> the name of its own vendor line

    def measure(self, shape, A, B, opened, wanted: set[str] | None, rounds: int, repeat: int):
        """Every variant of every backend on A and B, each beside its vendor lines."""
        cublas = next(
            (
                _vendor_line(label, backend, self.op, A.dtype)
                for label, backend in opened
                if backend.name == "cuda"
            ),
            None,
        )
        beside: dict[str, list[list[float]]] = {}  # each vendor line's samples, per rung
        self.launched: dict[str, Any] = {}  # each vendor line's kernels, as traced
        for label, backend in opened:
            if self.op not in backend.variant_table():
                continue
            own = None if backend.name == "cuda" else _vendor_line(label, backend, self.op, A.dtype)
            if own is not None:
                self.own_names[label] = self.reference_name.replace(
                    "cuBLAS", VENDOR_NAMES.get(backend.name, "vendor")
                )
            for variant, tile, choices in _configurations(backend, self.op, self.untuned):
                if wanted and variant not in wanted and variant != "vendor":
                    continue
                rung = Line(label, backend, variant, tile, choices)
                self._rung(shape, A, B, rung, (cublas, own), rounds, repeat, beside)
        work = flops(self.op, shape)
        for name, per_rung in beside.items():
            pooled = [seconds for samples in per_rung for seconds in samples]
            rates = [work / statistics.median(samples) / 1e12 for samples in per_rung]
            print(
                f"{shape}: {name} {work / statistics.median(pooled) / 1e12:.2f} TFLOP/s, the "
                f"median of its {len(pooled)} samples beside {len(per_rung)} rungs (from "
                f"{min(rates):.2f} to {max(rates):.2f} beside one)",
                flush=True,
            )
            print(f"{shape}: {name} launched {launched_text(self.launched.get(name))}")

    def _rung(self, shape, A, B, rung: Line, vendors, rounds, repeat, beside) -> None:
        """Time one rung beside the vendor lines (cuBLAS, its own) that are not itself."""
        others = [line for line in vendors if line is not None and line != rung]
        try:
            timed, timed_vendors = interleaved(rung, others, A, B, self.op, rounds, repeat)
        except xbackend.XBackendError as error:
            print(f"  {rung.label} {self.op} {rung.variant}: not run: {str(error).splitlines()[0]}")
            return
        for line, vendor in zip(others, timed_vendors, strict=True):
            name = f"{line.label} {VENDOR_NAMES.get(line.backend.name, 'vendor')}"
            beside.setdefault(name, []).append(vendor.samples_s)
            self.launched.setdefault(name, vendor.kernels)
        tflops = flops(self.op, shape) / statistics.median(timed.samples_s) / 1e12
        tuned = per_product(rung.backend.variant_spec(rung.variant, self.op))
        setting = rung.choices or "tuned"
        key = (str(shape), rung.variant, setting if tuned else str(rung.tile or "—"))
        if rung.choices and vendors[0] is not None and vendors[0] in others and timed.equal:
            cublas_s = timed_vendors[others.index(vendors[0])].samples_s
            pair = self.settings.setdefault((str(shape), rung.label, rung.variant), {})
            pair[rung.choices] = (timed.samples_s, cublas_s)
        cells = self.cells.setdefault(key, {})
        cells[rung.label] = f"{tflops:.2f}" if timed.equal else "WRONG"
        self.wrong |= not timed.equal
        for column, line in zip(("cuBLAS", "own"), vendors, strict=True):
            if line is None or not timed.equal:
                continue
            if line == rung:
                share = "100%"  # the line itself
            else:
                share = share_text(timed.samples_s, timed_vendors[others.index(line)].samples_s)
            cells[f"{rung.label}%{column}"] = share
        chosen = f" {timed.params}" if timed.params else ""
        shares = "; ".join(
            f"{cells[f'{rung.label}%{column}']} of {name}"
            for column, name in (
                ("cuBLAS", self.reference_name),
                ("own", self.own_names.get(rung.label, "")),
            )
            if f"{rung.label}%{column}" in cells
        )
        print(
            f"  {rung.label} {self.op} {rung.variant} {rung.choices or f'T={timed.tile}'}: "
            f"{cells[rung.label]} "
            f"TFLOP/s{chosen}{'; ' + shares if shares else ''}",
            flush=True,
        )

    def print_settings(self) -> None:
        """Each tuned rung untuned and tuned, side by side: its share of cuBLAS each way,
        and the untuned speed over the tuned one (a ratio of medians, 95% interval)."""
        rows = [["size", "backend", "variant", "untuned", "tuned", "untuned/tuned"]]
        for (size, label, variant), pair in self.settings.items():
            if set(pair) != {"untuned", "tuned"}:
                continue
            (untuned_s, cublas_u), (tuned_s, cublas_t) = pair["untuned"], pair["tuned"]
            shares = (share_text(untuned_s, cublas_u), share_text(tuned_s, cublas_t))
            rows.append([size, label, variant, *shares, share_text(untuned_s, tuned_s)])
        if len(rows) == 1:
            return
        print(f"\n{self.op}: shares of {self.reference_name}, untuned (no tune cache, no "
              "database: the device's derived default) and tuned (the database)")  # fmt: skip
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        rows.insert(1, ["-" * width for width in widths])
        for row in rows:
            print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))

    def _own_columns(self) -> list[str]:
        """The labels whose own vendor line ran beside their rungs: a second share."""
        return [label for label in self.labels if label in self.own_names]

    def print_table(self) -> None:
        header = ["size", "variant", "tile"]
        own = self._own_columns()
        for label in self.labels:
            header += [f"{label} TFLOP/s", f"of {self.reference_name}"]
            header += [f"of {self.own_names[label]}"] if label in own else []
        rows = [header]
        for (size, variant, tile), cells in self.cells.items():
            row = [size, variant, tile]
            for label in self.labels:
                row += [cells.get(label, NOT_TIMED), cells.get(f"{label}%cuBLAS", NOT_TIMED)]
                row += [cells.get(f"{label}%own", NOT_TIMED)] if label in own else []
            rows.append(row)
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        rows.insert(1, ["-" * width for width in widths])
        for row in rows:
            print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))


def triton_line(sizes, rounds: int, repeat: int) -> None:
    """Triton's blocked product beside cuBLAS through torch (see the module), a row a size."""
    try:
        import torch

        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "kernels" / "triton"))
        import matmul as triton_matmul  # kernels/triton/matmul.py
    except ImportError as missing:
        print(f"\nTriton not timed: {missing}")
        return
    if not torch.cuda.is_available():
        print("\nTriton not timed: no CUDA device for torch")
        return
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    def sample(call) -> float:
        call()  # warm: the previous turn may have been the other line's
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) / 1e3

    print("\nTriton (kernels/triton/matmul.py, float32, TF32 off) beside cuBLAS through torch,")
    print("interleaved, CUDA events around one call:")
    print("| size | Triton TFLOP/s | cuBLAS (torch) TFLOP/s | Triton / cuBLAS (95%) | config |")
    print("| --- | --- | --- | --- | --- |")
    for shape in sizes:
        A, B = make_operands(shape, seed=7)
        a, b = torch.from_numpy(A).cuda(), torch.from_numpy(B).cuda()
        found = triton_matmul.matmul(a, b)  # autotunes at this size
        equal = check(found.cpu().numpy(), Reference.of(A, B, "mm")).equal
        lines = {
            "cublas": lambda a=a, b=b: torch.matmul(a, b),
            "triton": lambda a=a, b=b: triton_matmul.matmul(a, b),
        }
        samples: dict[str, list[float]] = {name: [] for name in lines}
        for _ in range(rounds):
            for name, call in lines.items():
                samples[name] += [sample(call) for _ in range(repeat)]
        work = flops("mm", shape)
        speed = {name: work / statistics.median(s) / 1e12 for name, s in samples.items()}
        share = share_text(samples["triton"], samples["cublas"]) if equal else "WRONG"
        print(f"| {shape} | {speed['triton']:.2f} | {speed['cublas']:.2f} | {share} | "
              f"{triton_matmul.best_config()} |", flush=True)  # fmt: skip


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
    parser.add_argument("--repeat", type=int, default=5, help="timed samples per turn")
    parser.add_argument(
        "--rounds", type=int, default=4, help="turns of each rung and its vendor lines"
    )
    parser.add_argument("--variants", default=None, help="only these mm variants (comma list)")
    parser.add_argument(
        "--untuned",
        action="store_true",
        help="time each tuned variant twice: untuned (its default derived from the device, "
        "without the tune cache or the database), then tuned (the cache, then the database)",
    )
    parser.add_argument(
        "--no-triton", action="store_true", help="leave Triton's line out (see the module)"
    )
    parser.add_argument(
        "--rmm-variants",
        default=DEFAULT_RMM_VARIANTS,
        help="rmm variants to time (comma list; the vendor line always runs)",
    )
    args = parser.parse_args()
    if min(args.repeat, args.rounds) < 1:
        parser.error("--repeat and --rounds must be at least 1")
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
    print(
        "PyTorch's matmul is not timed: it cannot run under the backends' hold, and its "
        "plain CUDA events read +66% at 1024³; cuBLAS is the CUDA backend's vendor line."
    )
    labels = [label for label, _ in opened]
    mm = Ladder("mm", labels, "cuBLAS", args.untuned)
    wanted = set(args.variants.split(",")) if args.variants else None
    for shape in args.sizes:
        A, B = make_operands(shape, seed=7)
        mm.measure(shape, A, B, opened, wanted, args.rounds, args.repeat)
    print()
    mm.print_table()
    mm.print_settings()
    print(flush=True)
    rmm = Ladder("rmm", labels, "sums+cuBLAS", args.untuned)
    wanted_rmm = set(args.rmm_variants.split(",")) if args.rmm_variants else None
    rmm_sizes = args.rmm_sizes
    if rmm_sizes is None:
        rmm_sizes = [shape for shape in args.sizes if shape.M % 2 == 0 and shape.N % 2 == 0]
    for shape in rmm_sizes:
        A, B = make_operands(shape, seed=7)
        rmm.measure(shape, A, B, opened, wanted_rmm, args.rounds, args.repeat)
    for _, backend in opened:
        backend.close()
    if rmm.cells:
        print("\nThe reduced product (rmm), TFLOP/s of its half-size product:")
        rmm.print_table()
        rmm.print_settings()
    if not args.no_triton and any(backend.name == "cuda" for _, backend in opened):
        triton_line(args.sizes, args.rounds, args.repeat)
    return 1 if mm.wrong or rmm.wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
