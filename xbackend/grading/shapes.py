"""The shapes a kernel is checked, built and timed at: the nearest its manifest's rules take.

A kernel whose ``requires`` names the sizes (``K % TS == 0``, ``M == N``, ``M == N == K ==
4096``) runs only at the products they take: ``check`` runs it at the nearest one to each
shape it asks for, nvcc builds it at one (its ``-D`` options may name the sizes) and its
time is taken at the one nearest the assignment's largest size. The nearest is
``element.fitted``'s (the shape itself, square, rounded up to a multiple of 2 to 256);
where none of those is taken, it is made of the numbers the rules name, their literals
and the manifest's constants and parameters (``4096``, ``SIZE``), with the shape's own
sizes: a kernel of one size is checked at that size, whichever shape was asked for.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence

from xbackend.families import VariantSpec, expressions
from xbackend.grading import records
from xbackend.launches.element import fitted, shape_problem, size_names
from xbackend.operations import Shape

# The largest matrix (elements) a shape made of the rules' numbers may have: 2^28 float32
# elements are 1 GiB, the most a check is asked to hold of one operand.
MAX_ELEMENTS = 1 << 28
_NUMBER = re.compile(r"(?<![\w.])\d+(?![\w.])")


def rule_shape(spec: VariantSpec, M: int, N: int, K: int) -> tuple[int, int, int] | None:
    """The product nearest M×K · K×N whose sizes ``spec``'s rules take, as (M, N, K):
    ``fitted``'s, else one made of the numbers the rules name (the nearest by the ratio of
    each size to the one asked, then the least work); None where neither is taken."""
    found = fitted(spec, M, N, K)
    if found is not None or not spec.size_rules:
        return found
    names = spec.names_at(spec.default_tile, None)
    numbers = _numbers(spec, names)
    choices = [sorted({size, *numbers}) for size in (M, N, K)]

    def distance(sizes: tuple[int, ...]) -> tuple[float, int]:
        apart = sum(abs(math.log(got / asked)) for got, asked in zip(sizes, (M, N, K), strict=True))
        return apart, math.prod(sizes)

    for m, n, k in sorted(itertools.product(*choices), key=distance):
        if max(m * k, k * n, m * n) > MAX_ELEMENTS:
            continue
        if shape_problem(spec, {**names, **size_names(m, n, k)}) is None:
            return m, n, k
    return None


def _numbers(spec: VariantSpec, names: dict[str, int]) -> set[int]:
    """The positive numbers a kernel's rules on the sizes name: their literals, and the
    values of the other names they use (constants, parameters, TILE)."""
    found: set[int] = set()
    for rule in spec.size_rules:
        found |= {int(number) for number in _NUMBER.findall(rule)}
        found |= {names[name] for name in expressions.names(rule) if name in names}
    return {number for number in found if 0 < number <= MAX_ELEMENTS}


def taken_shapes(spec: VariantSpec, shapes: Sequence[Shape]) -> list[Shape]:
    """``shapes``, each as the nearest one the kernel's rules take (``rule_shape``), once;
    a shape no rule-taken one is near stays as it is (its check says which rule)."""
    found: list[Shape] = []
    for shape in shapes:
        sizes = rule_shape(spec, shape.M, shape.N, shape.K)
        taken = Shape(M=sizes[0], N=sizes[1], K=sizes[2]) if sizes is not None else shape
        if taken not in found:
            found.append(taken)
    return found


def ruled_out(asked: Sequence[Shape], shape: Shape) -> str:
    """What a deadline passed at ``shape`` may mean where the kernel's rules chose it, no
    shape asked being one they take (a kernel of one size): its work, which a slow device
    may not finish in time; "" for a shape asked."""
    if shape in asked:
        return ""
    work = shape.M * shape.N * shape.K
    return (f" ({records.compact(shape)} is the shape its rules take: {work:,} multiply-adds, "
            "perhaps too many to check on this device in that time)")  # fmt: skip
