"""What a figure draws: its lines, each a configuration at one batch, and their points."""

from __future__ import annotations

from typing import NamedTuple

from xbackend.results import LineKey, PointRecord


class Line(NamedTuple):
    """A line of a figure: one configuration at one batch (the batch changes the product)."""

    key: LineKey
    batch: int
    batched: bool


Lines = dict[Line, list[PointRecord]]
