"""Run every variant and tile of one backend at small, odd sizes and check each result.

    python scripts/kernel_probe.py --backend opencl
    oclgrind --data-races --uninitialized python scripts/kernel_probe.py --backend opencl
    compute-sanitizer --tool racecheck python scripts/kernel_probe.py --backend cuda

Meant to run under a checker (oclgrind, compute-sanitizer): the sizes are small enough to
simulate, not multiples of any tile (every edge guard runs), and one has K > 32 (every
tile size loops, so a missing barrier between loop trips shows). Prints one line
per case and exits 1 if any result is wrong. ``XBACKEND_KERNELS`` points it at other
kernel files (the tests use it for deliberately broken ones).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import xbackend
from xbackend.problems import Reference, check, make_operands
from xbackend.runner import Target
from xbackend.sweep import parse_shapes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="opencl", help="NAME or NAME:DEVICE")
    parser.add_argument("--sizes", type=parse_shapes, default=parse_shapes("7x5x9,33x70x35"))
    parser.add_argument("--tiles", default="8,16,32", help="tile sizes to try (default 8,16,32)")
    args = parser.parse_args()
    target = Target.parse(args.backend)
    failures = 0
    with xbackend.get_backend(target.name, target.device) as backend:
        print(f"{backend.name}: {backend.device.name}")
        for shape in args.sizes:
            A, B = make_operands(shape, seed=11)
            reference = Reference.of(A, B)
            for variant in backend.variants():
                spec = backend.variant_spec(variant)
                wanted = [int(t) for t in args.tiles.split(",")] if spec.takes_tile else [None]
                for tile in wanted:
                    if tile is not None and backend.tile_problem(variant, tile):
                        print(f"SKIP  {variant} T={tile}: {backend.tile_problem(variant, tile)}")
                        continue
                    verdict = check(backend.matmul(A, B, variant=variant, tile=tile), reference)
                    failures += not verdict.equal
                    print(f"{'PASS' if verdict.equal else 'FAIL'}  {variant} T={tile} {shape}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
