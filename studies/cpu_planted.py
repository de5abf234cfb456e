"""compare with the CPU backend's serial loop (``naive``) planted 1.5× slower: B of the CPU
backend's planted pair in docs/diff.md (issue 53), A being the same command without
``--slower``. The loop is replaced in this process only (no switch in xbackend): each
product is computed, then half its rows again into a scratch matrix.
Usage: python studies/cpu_planted.py [--slower] COMPARE-ARGUMENTS..."""

from __future__ import annotations

import sys

import numpy as np

from xbackend.backends import cpu
from xbackend.cli import main

_NAIVE = cpu._naive


def _slower(A: np.ndarray, B: np.ndarray, C: np.ndarray) -> None:
    _NAIVE(A, B, C)
    half = A[: (A.shape[0] + 1) // 2]
    _NAIVE(half, B, np.empty((half.shape[0], C.shape[1]), C.dtype))


if __name__ == "__main__":
    arguments = sys.argv[1:]
    if "--slower" in arguments:
        arguments.remove("--slower")
        cpu._naive = _slower
    sys.exit(main(arguments))
