"""What the kernels' wide index costs: each variant's default build (32-bit offsets) and
its wide build (64-bit offsets, -DWIDE_INDEX) timed side by side on one device.

    python scripts/index_cost.py                                         # CUDA: 2048³, 4096³
    python scripts/index_cost.py --backend opencl --sizes 128x128x128    # anywhere

A product gets the wide build only where its offsets pass 2^31 - 1 (launches/plans.py):
then this is what it pays. For each size, each variant of each operation (mm: naive,
tiled and every rung of the ladder; the vendor line runs no kernel of ours and is left
out) at its default tile (the tuned variants at what they choose for the size) runs the
same product in both builds, interleaved: default, wide, default, wide, ... in
``--rounds`` rounds of ``--repeat`` samples each (the kernel time on the device's clock;
samples the sampler marks are left out), so that both meet the device in the same state.
Both builds' results are checked against the float64 reference in their first turn.

Each row prints both medians and the cost: the wide build's median time over the
default's, with its 95% interval (a seeded bootstrap of that ratio from both sets of
samples, ``xbackend diff``'s ratio of medians). 1.00 costs nothing; 1.10 is 10% slower.
A wrong result prints WRONG and makes the exit status 1.
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
from xbackend.analysis.diff import ratio_interval
from xbackend.operations import operation
from xbackend.problems import Reference, check, dtype_named, make_operands
from xbackend.sweep.runner import Target
from xbackend.sweep.sizes import parse_shapes

DEFAULT_SIZES = "2048x2048x2048,4096x4096x4096"
BUILDS = {"default": "auto", "wide": "wide"}  # a column's name -> its use_index mode


@dataclasses.dataclass
class Timed:
    """One build's kernel samples over the rounds, and what its first turn gave."""

    samples_s: list[float] = dataclasses.field(default_factory=list)
    equal: bool = True
    bits: int = 0  # the width of the offsets it was built with
    tile: int | None = None


def interleaved(
    backend: Any, A: Any, B: Any, variant: str, op: str, rounds: int, repeat: int
) -> dict[str, Timed]:
    """The default and the wide build of one product, in turns: ``rounds`` times each,
    ``repeat`` samples a turn; each build's results are checked in its first turn."""
    timed = {name: Timed() for name in BUILDS}
    reference = Reference.of(A, B, op)
    try:
        for number in range(rounds):
            for name, mode in BUILDS.items():
                backend.use_index(mode)
                measured = backend.measure(
                    A, B, variant, op=op, warmup=1, samples=repeat, min_samples=repeat
                )
                timed[name].samples_s.extend(measured.kept[0])
                if number == 0:
                    outputs = (measured.result, measured.last_result)
                    timed[name].equal = all(check(out, reference).equal for out in outputs)
                    timed[name].bits = backend.index_bits(A, B, variant, op=op)
                    timed[name].tile = measured.tile
    finally:
        backend.use_index(None)
    return timed


def cost_text(default_s: list[float], wide_s: list[float]) -> str:
    """The wide build's median over the default's, with its interval: 1.031 [1.012–1.050]."""
    cost = ratio_interval(default_s, wide_s)
    return f"{cost.ratio:.3f} [{cost.low:.3f}–{cost.high:.3f}]"


def _ms(samples_s: list[float]) -> str:
    return f"{statistics.median(samples_s) * 1e3:.3f}" if samples_s else "—"


def _row(shape: Any, op: str, variant: str, timed: dict[str, Timed]) -> list[str]:
    default, wide = timed["default"], timed["wide"]
    tile = str(default.tile or "—")
    if not (default.equal and wide.equal):
        return [str(shape), op, variant, tile, _ms(default.samples_s), _ms(wide.samples_s), "WRONG"]
    bits = f"{default.bits}/{wide.bits}"
    cost = cost_text(default.samples_s, wide.samples_s)
    return [str(shape), op, variant, tile, bits, _ms(default.samples_s), _ms(wide.samples_s), cost]


HEADER = ["size", "op", "variant", "tile", "bits", "default ms", "wide ms", "wide/default [95%]"]


def print_table(rows: list[list[str]]) -> None:
    table = [HEADER, *rows]
    widths = [max(len(row[i]) for row in table if i < len(row)) for i in range(len(HEADER))]
    table.insert(1, ["-" * width for width in widths])
    for row in table:
        cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=False))
        print("  ".join(cells).rstrip())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cuda", help="NAME or NAME:DEVICE (default cuda)")
    parser.add_argument("--sizes", type=parse_shapes, default=parse_shapes(DEFAULT_SIZES))
    parser.add_argument("--ops", default="mm", help="operations (comma list; default mm)")
    parser.add_argument("--variants", default=None, help="only these variants (comma list)")
    parser.add_argument("--dtype", default="float32", help="element type (default float32)")
    parser.add_argument("--repeat", type=int, default=5, help="timed samples per turn")
    parser.add_argument("--rounds", type=int, default=6, help="turns of each build")
    args = parser.parse_args()
    if min(args.repeat, args.rounds) < 1:
        parser.error("--repeat and --rounds must be at least 1")
    target = Target.parse(args.backend)
    try:
        backend = xbackend.get_backend(target.name, target.device)
    except xbackend.BackendUnavailable as error:
        print(f"index_cost: {target.label} is unavailable: {error.reason}", file=sys.stderr)
        return 2
    wanted = set(args.variants.split(",")) if args.variants else None
    rows, wrong = [], False
    with backend:
        if not hasattr(backend, "use_index"):
            print(f"index_cost: {backend.name} runs no kernel files", file=sys.stderr)
            return 2
        print(f"{backend.name}: {backend.device.name}; {args.rounds} rounds of {args.repeat}")
        for shape in args.sizes:
            for op in args.ops.split(","):
                problem = operation(op).shape_problem(shape.M, shape.N)
                if problem:
                    print(f"  {shape} {op}: not run: {problem}")
                    continue
                batch = 4 if operation(op).batched else None
                A, B = make_operands(shape, 7, dtype_named(args.dtype), batch=batch)
                for variant in backend.runnable_variants(op, A.dtype):
                    if variant == "vendor" or (wanted and variant not in wanted):
                        continue
                    timed = interleaved(backend, A, B, variant, op, args.rounds, args.repeat)
                    rows.append(_row(shape, op, variant, timed))
                    wrong |= rows[-1][-1] == "WRONG"
                    print("  " + "  ".join(rows[-1]), flush=True)
    print()
    print_table(rows)
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
