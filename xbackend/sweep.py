"""Size schedules: the assignment's iterative growth, explicit lists, and their parsing."""

from __future__ import annotations

import re

from xbackend.problems import Shape

_SIZE = re.compile(r"^\s*(\d+)\s*[x×*,]\s*(\d+)\s*(?:[x×*,]\s*(\d+)\s*)?$")


def parse_shape(text: str) -> Shape:
    """``"MxK"`` (A is M×K, B is K×M, as in the assignment) or ``"MxKxN"``."""
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"bad size {text!r}: write MxK (A is M×K, B is K×M) or MxKxN")
    M, K = int(match[1]), int(match[2])
    N = int(match[3]) if match[3] else M
    try:
        return Shape(M, K, N)
    except ValueError as error:
        raise ValueError(f"bad size {text!r}: {error}") from None


def parse_shapes(text: str) -> list[Shape]:
    """A comma- or space-separated list of sizes, e.g. ``"16x14 32x28 64x64x8"``."""
    items = [item for item in re.split(r"[\s;]+|,(?=\s*\d+\s*[x×*])", text) if item.strip()]
    if not items:
        raise ValueError("no sizes given")
    return [parse_shape(item) for item in items]


def growth(base: Shape, steps: int) -> list[Shape]:
    """``base`` grown linearly: step i (1..steps) multiplies every dimension by i.

    The default schedule is the assignment's: A is (16·i)×(14·i) and B is
    (14·i)×(16·i) for i = 1..38.
    """
    if steps < 1:
        raise ValueError(f"steps must be at least 1, not {steps}")
    return [Shape(base.M * i, base.K * i, base.N * i) for i in range(1, steps + 1)]


DEFAULT_BASE = Shape(16, 14, 16)
DEFAULT_STEPS = 38
