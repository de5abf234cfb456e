"""Build variants afresh several times on one device and count the builds that compute wrong.

    python scripts/fresh_builds.py --backend opencl:pocl --variants reg2d,reg2d_g4 --builds 8

A runtime whose compiler is not deterministic (PoCL 5: docs/kernels.md, "Runtimes that
miscompile a shipped kernel") can build a right kernel wrongly now and then, and a
cache then keeps the wrong build. Here every build is fresh: a new backend each time,
PyOpenCL's and PoCL's caches off, and each builds and runs one small product (7×5 · 5×3
by default: one group, every edge guard) checked against NumPy, the output poisoned with
NaN. A variant refused on the device (a known runtime fault) is said with its reason and
not run. Prints one line a variant and exits 1 if any build computed a wrong product.
Builds within one process share its memory layout: run several processes for more
variety (tests/test_pocl.py does).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

# Before PyOpenCL is imported: it reads the variable then.
os.environ["PYOPENCL_NO_CACHE"] = "1"
os.environ["POCL_KERNEL_CACHE"] = "0"

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from xbackend import get_backend
from xbackend.problems import Reference, Shape, check, make_operands
from xbackend.sweep.sizes import parse_shape


def wrong_builds(
    backend_name: str, device: str | None, variant: str, shape: Shape, builds: int, seed: int
) -> int | str:
    """How many of ``builds`` fresh builds of ``variant`` computed a wrong product, or the
    device's reason for refusing it (a string)."""
    wrong = 0
    for build in range(builds):
        A, B = make_operands(shape, seed=seed + build)
        with get_backend(backend_name, device) as backend:  # a new backend: a new build
            problem = backend.variant_problem(variant, np.dtype(np.float32), "mm")
            if problem:
                return problem
            wrong += not check(backend.matmul(A, B, variant=variant), Reference.of(A, B)).equal
    return wrong


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="opencl:pocl", help="NAME:DEVICE")
    parser.add_argument("--variants", default="reg1d,reg2d,reg2d_cf,reg2d_g4")
    parser.add_argument("--builds", type=int, default=4, help="fresh builds of each variant")
    parser.add_argument("--shape", type=parse_shape, default=parse_shape("7x5x3"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    name, _, device = args.backend.partition(":")
    failed = False
    for variant in args.variants.split(","):
        wrong = wrong_builds(name, device or None, variant, args.shape, args.builds, args.seed)
        if isinstance(wrong, str):
            print(f"REFUSED {variant}: {wrong}")
            continue
        failed |= wrong > 0
        print(f"{'FAIL' if wrong else 'PASS'} {variant}: {wrong} of {args.builds} builds wrong")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
