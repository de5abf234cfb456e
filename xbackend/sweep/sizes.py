"""Size schedules: the assignment's growth, explicit lists, and the documents' presets."""

from __future__ import annotations

import dataclasses
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
# What the assignment compares: the naive and the tiled kernel, with the backend's vendor
# library as the reference line. What ``compare`` and its first two presets run.
ASSIGNMENT_VARIANTS = ("naive", "tiled", "vendor")
DEFAULT_STEPS = 38


def squares(sizes: list[int]) -> list[Shape]:
    return [Shape(n, n, n) for n in sizes]


@dataclasses.dataclass(frozen=True)
class Preset:
    """One experiment of the source documents, sized for a GPU and for a CPU-only machine."""

    name: str
    description: str
    ops: tuple[str, ...]
    dtypes: tuple[str, ...]
    tiles: tuple[int, ...] | None  # None: each variant's default
    batch: int
    gpu_shapes: tuple[Shape, ...]
    cpu_shapes: tuple[Shape, ...]
    variants: tuple[str, ...] | None = ASSIGNMENT_VARIANTS  # None: every variant

    def shapes(self, gpu: bool) -> list[Shape]:
        return list(self.gpu_shapes if gpu else self.cpu_shapes)


PRESETS: dict[str, Preset] = {
    preset.name: preset
    for preset in (
        Preset(
            "assignment",
            "non-square A (16·i)×(14·i) · B (14·i)×(16·i), i = 1..38: naive against tiled",
            ("mm",),
            ("float32",),
            None,
            1,
            tuple(growth(DEFAULT_BASE, DEFAULT_STEPS)),
            tuple(growth(DEFAULT_BASE, DEFAULT_STEPS)),
        ),
        Preset(
            "lab",
            "square powers of two, 16 to 32768 (1024 without a GPU): naive against shared "
            "memory, tiles 16 and 32, and the speed-up",
            ("mm",),
            ("float32",),
            (16, 32),
            1,
            # From 16384 on, checked with Freivalds' method (problems.FREIVALDS_ABOVE_FLOPS);
            # 32768 (three matrices of 4 GiB) where the device holds it, skipped where not.
            tuple(squares([2**e for e in range(4, 16)])),
            tuple(squares([2**e for e in range(4, 11)])),
        ),
        Preset(
            "chapter",
            "the reduced product at 128, 512, 2048, 8192, 16384 and 32768 (128 to 1024 "
            "without a GPU): naive4, naive and tiled at tiles 8, 16 and 32",
            ("rmm",),
            ("float32",),
            (8, 16, 32),
            1,
            # 16384 and 32768 checked with Freivalds' method, as in the lab preset.
            tuple(squares([128, 512, 2048, 8192, 16384, 32768])),
            tuple(squares([128, 256, 512, 1024])),
            # The chapter's kernels and the vendor line (--variants chooses others).
            ("naive4", "naive", "tiled", "vendor"),
        ),
        Preset(
            "blog",
            "latency of mm and of bmm (a batch of 8) at 1024³ (256³ without a GPU) "
            "for int32, float32 and float64",
            ("mm", "bmm"),
            ("int32", "float32", "float64"),
            None,
            8,
            tuple(squares([1024])),
            tuple(squares([256])),
            None,  # every variant: the latency of each
        ),
    )
}
