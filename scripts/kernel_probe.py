"""Run every variant and tile of one backend at small, odd sizes and check each result.

    python scripts/kernel_probe.py --backend opencl
    oclgrind --data-races --uninitialized python scripts/kernel_probe.py --backend opencl
    compute-sanitizer --tool racecheck python scripts/kernel_probe.py --backend cuda

Meant to run under a checker (oclgrind, compute-sanitizer): the sizes are small enough to
simulate, not multiples of any tile (every edge guard runs), and one has K > 32 (every
tile size loops, so a missing barrier between loop trips shows). The tuned variants
(mm_warp) also run at ``--tuned-sizes``, where a 64×64 tile lies inside the output
and rows are 16-byte aligned: their unchecked 16-byte loads run there. Prints one
line per case and exits 1 if any result is wrong. ``XBACKEND_KERNELS`` points it at other
kernel files (the tests use it for deliberately broken ones). ``--plans`` runs nothing: it
prints each case's product as planned on the device (``grading/sanitized.product_said``),
what a simulator's run of the same cases is keyed by (tests/conftest.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import xbackend
from xbackend.backends.compiled import CompiledBackend
from xbackend.grading.sanitized import product_said
from xbackend.launches.geometries import per_product
from xbackend.problems import Reference, Shape, check, dtype_named, make_operands
from xbackend.sweep.runner import Target
from xbackend.sweep.sizes import parse_shapes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="opencl", help="NAME or NAME:DEVICE")
    parser.add_argument("--sizes", type=parse_shapes, default=parse_shapes("7x5x9,33x70x35"))
    parser.add_argument(
        "--tiles", default=None, help="tile sizes to try (default: each variant's own)"
    )
    parser.add_argument(
        "--ops", default="mm,bmm,rmm", help="operations to run (default mm,bmm,rmm)"
    )
    parser.add_argument(
        "--tuned-tiles",
        default=None,
        help="tile sizes for the tuned variants (default: as --tiles); oclgrind's CI run "
        "takes 64 alone, the cheapest to simulate",
    )
    parser.add_argument(
        "--tuned-sizes",
        type=parse_shapes,
        default=parse_shapes("66x12x72"),
        help="sizes for the tuned variants only (default 66x12x72)",
    )
    parser.add_argument("--dtype", default="float32", help="element type (default float32)")
    parser.add_argument(
        "--skip",
        default="",
        help="variants to leave out, e.g. vendor (a library's own kernels are not ours to check)",
    )
    parser.add_argument(
        "--plans", action="store_true", help="print each case's planned product, run nothing"
    )
    args = parser.parse_args()
    dtype = dtype_named(args.dtype)
    target = Target.parse(args.backend)
    failures = 0
    with xbackend.get_backend(target.name, target.device) as backend:
        print(f"{backend.name}: {backend.device.name}")
        for op in args.ops.split(","):
            sizes = [(given, False) for given in args.sizes]
            sizes += [(given, True) for given in args.tuned_sizes]
            for given, tuned_only in sizes:
                # rmm needs even M and N, and computes (M/2)×(N/2): twice the rows and
                # columns give it the same output. A batch of 2 proves the z offsets.
                shape = given
                if op == "rmm":
                    twice = Shape(2 * given.M, given.K, 2 * given.N)
                    even = Shape(given.M + given.M % 2, given.K, given.N + given.N % 2)
                    shape = twice if tuned_only else even
                A, B = make_operands(shape, 11, dtype, batch=2 if op == "bmm" else None)
                reference = Reference.of(A, B, op)
                tiles = (args.tiles, args.tuned_tiles or args.tiles)
                failures += _probe(
                    backend, op, shape, A, B, reference, tiles, tuned_only, args.skip.split(","),
                    args.plans,
                )  # fmt: skip
    return 1 if failures else 0


def _probe(
    backend: xbackend.Backend,
    op: str,
    shape: Shape,
    A: np.ndarray,
    B: np.ndarray,
    reference: Reference,
    tiles: tuple[str | None, str | None],
    tuned_only: bool = False,
    skip: Sequence[str] = (),
    plans: bool = False,
) -> int:
    """Every variant and tile of ``op`` at one size; the number of wrong results.

    ``tiles``: the tile sizes to try for the fixed and for the tuned variants (None:
    each variant's own); ``plans``: print each one's planned product, run none."""
    failures = 0
    for variant in backend.runnable_variants(op):
        spec = backend.variant_spec(variant, op)
        if variant in skip or (tuned_only and not per_product(spec)):
            continue
        wanted: list[int | None] = [None]
        chosen = tiles[1] if per_product(spec) else tiles[0]
        if spec.takes_tile:
            wanted = [int(t) for t in chosen.split(",")] if chosen else list(spec.tiles)
        for tile in wanted:
            problem = tile is not None and backend.tile_problem(variant, tile, A.itemsize, op)
            if problem:
                print(f"SKIP  {op} {variant} T={tile}: {problem}")
                continue
            if plans:  # a compiled backend's: the others run no kernel to simulate
                assert isinstance(backend, CompiledBackend), backend.name
                planned = product_said(backend.planned(op, variant, tile, A, B))
                print(f"PLAN  {op} {variant} T={tile} {json.dumps(planned, sort_keys=True)}")
                continue
            result = backend.measure(A, B, variant, tile, op=op, warmup=0, samples=0).result
            verdict = check(result, reference)
            failures += not verdict.equal
            print(f"{'PASS' if verdict.equal else 'FAIL'}  {op} {variant} T={tile} {shape}")
    return failures


if __name__ == "__main__":
    raise SystemExit(main())
