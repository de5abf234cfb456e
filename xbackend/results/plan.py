"""What a comparison measures: the plan, as run and as recorded in a run header.

The plan is data shared by the runner (which carries it out), the results (whose
run header records it) and the report (which reads it back to name the
experiment and the operations run). It lives apart from the runner so that the
results can type it without importing the runner and, through it, the backends.
"""

from __future__ import annotations

import contextlib
import dataclasses
import typing
from typing import Any

from xbackend.measuring.timing import Sampling
from xbackend.operations import DEFAULT, Shape
from xbackend.problems import AUTO, CHECKS, FULL


@dataclasses.dataclass(frozen=True)
class Target:
    """A backend to run, as named on the command line: ``name`` or ``name:device``."""

    name: str
    device: str | None = None

    @classmethod
    def parse(cls, text: str) -> Target:
        name, _, device = text.strip().partition(":")
        if not name:
            raise ValueError(f"bad backend {text!r}: write NAME or NAME:DEVICE")
        return cls(name.lower(), device or None)

    @property
    def label(self) -> str:
        return f"{self.name}:{self.device}" if self.device else self.name


@dataclasses.dataclass
class Plan:
    """What to measure and how thoroughly."""

    shapes: list[Shape]
    ops: list[str] = dataclasses.field(default_factory=lambda: [DEFAULT])
    dtypes: list[str] = dataclasses.field(default_factory=lambda: ["float32"])
    batch: int = 1  # products per bmm
    variants: list[str] | None = None  # None: every variant of each backend
    tiles: list[int] | None = None  # None: each variant's default tile
    preset: str | None = None  # the experiment this plan comes from, for the report
    seed: int = 0
    # How each point is sampled, carried whole to the sampler (timing.Sampling; a
    # preset's: timing.PRESETS).
    sampling: Sampling = dataclasses.field(default_factory=Sampling)
    budget_s: float = 20.0  # per point; 0 turns the estimate off
    check: str = AUTO  # problems.CHECKS: how results are verified (--check)

    def setting(self, name: str) -> object:
        """A field of the plan (the seed) or of its sampling (the cache mode, the samples)."""
        return getattr(self, name) if hasattr(self, name) else getattr(self.sampling, name)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["shapes"] = [[s.M, s.K, s.N] for s in self.shapes]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        """The plan a run header recorded, read loosely: a field of the wrong type takes
        its default, a size that is not three positive integers is left out.

        Older headers name one operation (``op``) or none (then it was mm).
        """
        ops = _strings(data.get("ops"))
        if ops is None:
            legacy = data.get("op")
            ops = [legacy] if isinstance(legacy, str) and legacy else [DEFAULT]
        defaults = cls(shapes=[])
        preset = data.get("preset")
        return cls(
            shapes=_shapes(data.get("shapes")),
            ops=ops,
            dtypes=_strings(data.get("dtypes")) or list(defaults.dtypes),
            batch=_count(data.get("batch"), defaults.batch),
            variants=_strings(data.get("variants")),
            tiles=_counts(data.get("tiles")),
            preset=None if preset in (None, "") else str(preset),
            seed=_count(data.get("seed"), defaults.seed),
            sampling=_sampling(data),
            budget_s=_real(data.get("budget_s"), defaults.budget_s),
            # Older headers: every point was checked against the full reference.
            check=_choice(data.get("check"), CHECKS, FULL),
        )


def _sampling(data: dict[str, Any]) -> Sampling:
    """The sampling a header recorded: its ``sampling`` object, or (older headers) the
    plan's own fields of the same meaning; read loosely, as the plan is.

    Every field of ``Sampling`` is read by its type (issue 55: a list by hand missed
    ``energy_s``); a value of the wrong type, or one ``Sampling`` refuses, takes the
    default, or what an older header that lacks the field ran (``_BEFORE_THE_FIELD``)."""
    given = data.get("sampling")
    kept = given if isinstance(given, dict) else {**data, "max_samples": data.get("samples")}
    sampling = Sampling()
    types = typing.get_type_hints(Sampling)
    for field in dataclasses.fields(Sampling):
        if field.name not in kept:
            value = _BEFORE_THE_FIELD.get(field.name, getattr(sampling, field.name))
        else:
            read = _READERS.get(types[field.name], _same_type)
            value = read(kept[field.name], getattr(sampling, field.name))
        # A value Sampling refuses (a cache mode of another version) leaves the default.
        with contextlib.suppress(ValueError):
            sampling = dataclasses.replace(sampling, **{field.name: value})
    return sampling


def _text(value: Any, default: str) -> str:
    return value if isinstance(value, str) else default


def _same_type(value: Any, default: Any) -> Any:
    return value if type(value) is type(default) else default


# What a header from before a field ran: every sample was one launch before batches.
_BEFORE_THE_FIELD: dict[str, Any] = {"short_kernel_s": 0.0}


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _count(value: Any, default: int) -> int:
    return value if _is_count(value) else default


def _real(value: Any, default: float) -> float:
    return float(value) if _is_count(value) or isinstance(value, float) else default


def _choice(value: Any, choices: tuple[str, ...], default: str) -> str:
    return value if value in choices else default


def _strings(value: Any) -> list[str] | None:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else None


def _counts(value: Any) -> list[int] | None:
    return [item for item in value if _is_count(item)] if isinstance(value, list) else None


def _shapes(value: Any) -> list[Shape]:
    if not isinstance(value, list):
        return []
    return [
        Shape(*shape)
        for shape in value
        if isinstance(shape, list | tuple)
        and len(shape) == 3
        and all(_is_count(n) and n >= 1 for n in shape)
    ]


# How a field of each type is read (``_sampling``); a new type is one row here.
_READERS: dict[Any, Any] = {int: _count, float: _real, str: _text}
