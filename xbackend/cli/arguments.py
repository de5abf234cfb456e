"""Parsers of option values: lists, sizes, tiles and bounded numbers, each a usage error
with its reason when the text is not one."""

from __future__ import annotations

import argparse
import datetime
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from xbackend.operations import OPS
from xbackend.problems import DTYPES, Shape
from xbackend.sweep.sizes import parse_shape, parse_shapes

# Bounds that keep a typo from meaning days of work or all of memory.
MAX_STEPS = 1000
MAX_BATCH = 65535  # the launch's z axis (CUDA's grid limit)
MAX_WARMUP = 1000
MAX_SAMPLES = 100_000
MAX_SEED = 2**63 - 1

_Number = TypeVar("_Number", int, float)


def comma_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def tiles(text: str) -> list[int]:
    try:
        found = [int(item) for item in comma_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"tiles are integers, e.g. 8,16,32: {text!r}") from None
    if not found or min(found) < 1:
        raise argparse.ArgumentTypeError(f"tiles must be positive integers: {text!r}")
    return found


def shape(text: str) -> Shape:
    try:
        return parse_shape(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def shapes(text: str) -> list[Shape]:
    try:
        return parse_shapes(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def choices(kind: str, known: Sequence[str]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        items = comma_list(text)
        unknown = [item for item in items if item not in known]
        if not items or unknown:
            raise argparse.ArgumentTypeError(
                f"unknown {kind} {', '.join(unknown) or repr(text)}; known: {', '.join(known)}"
            )
        return items

    return parse


ops = choices("operation", OPS)
dtypes = choices("dtype", list(DTYPES))


def names(kind: str) -> Callable[[str], list[str]]:
    """A comma-separated list of names, none empty and none twice."""

    def parse(text: str) -> list[str]:
        items = comma_list(text)
        if not items:
            raise argparse.ArgumentTypeError(f"no {kind} given: {text!r}")
        twice = sorted({item for item in items if items.count(item) > 1})
        if twice:
            raise argparse.ArgumentTypeError(f"{kind} named twice: {', '.join(twice)}")
        return items

    return parse


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}: {value}")
        if value > high:
            raise argparse.ArgumentTypeError(f"must be at most {high}: {value}")
        return value

    return parse


def non_negative(kind: Callable[[str], _Number]) -> Callable[[str], _Number]:
    def parse(text: str) -> _Number:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not 0 <= value < float("inf"):
            raise argparse.ArgumentTypeError(f"must be a finite number, not negative: {value}")
        return value

    return parse


def positive(kind: Callable[[str], _Number]) -> Callable[[str], _Number]:
    def parse(text: str) -> _Number:
        value = non_negative(kind)(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be more than 0, not {value}")
        return value

    return parse


def share(low: float, high: float, *, low_included: bool = False) -> Callable[[str], float]:
    """A share written as ``5%`` or ``0.05``, from ``low`` (excluded unless
    ``low_included``) up to ``high`` (excluded)."""

    def parse(text: str) -> float:
        word = text.strip()
        try:
            value = float(word[:-1]) / 100 if word.endswith("%") else float(word)
        except ValueError:
            raise argparse.ArgumentTypeError(f"a share such as 5% or 0.05, not {text!r}") from None
        if not (low <= value if low_included else low < value) or not value < high:
            hint = f" (for {word} per cent, write {word}%)" if not word.endswith("%") else ""
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a share from {low:.0%} to under {high:.0%}{hint}"
            )
        return value

    return parse


def default_out(kind: str) -> Path:
    """``results/KIND-<date-time>``: where a command writes when ``--out`` names nothing."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("results") / f"{kind}-{stamp}"


def fresh_out(kind: str) -> Path:
    """``default_out(kind)`` made now and this command's alone: two commands started in
    the same second get ``-2``, ``-3`` ... rather than one folder."""
    base = default_out(kind)
    base.parent.mkdir(parents=True, exist_ok=True)
    for count in range(1, 1000):
        path = base if count == 1 else base.with_name(f"{base.name}-{count}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    return base
