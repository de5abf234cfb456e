"""What a tune cache entry may hold, checked: its key's fields, its parameters (as the
geometry they belong to says: ``geometries.of_entry``), its counts, its race and its
objective (``objective.py``); and its parameters as the tuner's candidate (``candidate``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from xbackend.launches import geometries
from xbackend.launches.choices import Candidate, is_count
from xbackend.tuning.objective import ENTRY_INTERVALS, ENTRY_NUMBERS, OBJECTIVES

KEY_FIELDS = ("backend", "device", "variant", "operation", "dtype", "shape class")


def _shorten(text: object, limit: int = 120) -> str:
    text = str(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _params_problem(params: dict[str, Any]) -> str | None:
    """Why a choice's parameters are no configuration of the geometry they belong to
    (block tiles the planner accepts on any device; a tile, or a family's parameters)."""
    return geometries.of_entry(params).entry_problem(params)


def entry_problem(entry: Any) -> str | None:
    """Why a cache entry cannot be used, or None: its ``params`` must be a configuration
    its geometry accepts on any device (``Geometry.entry_problem``; the device's own
    limits are checked at lookup), ``blocks`` a count, ``tflops`` and ``shape`` what
    ``tune`` writes (``tune --show`` prints them)."""
    if not isinstance(entry, dict):
        return "not an object"
    params = entry.get("params")
    if not isinstance(params, dict):
        return "no params object"
    problem = _params_problem(params)
    if problem:
        return problem
    if not is_count(entry.get("blocks", 0)):
        return f"blocks must be a count, not {_shorten(entry['blocks'])!r}"
    tflops = entry.get("tflops")
    if tflops is not None and not _is_number(tflops):
        return f"tflops must be a number, not {_shorten(tflops)!r}"
    if not isinstance(entry.get("shape", ""), str):
        return f"shape must be text, not {entry['shape']!r}"
    build = entry.get("build", {})
    if not isinstance(build, dict) or not all(isinstance(v, str) for v in build.values()):
        return f"build must be an object of texts, not {_shorten(build)!r}"
    return _race_problem(entry) or _objective_problem(entry)


def _objective_problem(entry: dict[str, Any]) -> str | None:
    """Why an entry's objective and its energy fields are malformed, or None (each is
    optional: an entry without ``objective`` was tuned for time)."""
    objective = entry.get("objective", OBJECTIVES[0])
    if objective not in OBJECTIVES:
        return f"objective must be one of {', '.join(OBJECTIVES)}, not {_shorten(objective)!r}"
    for name in ENTRY_NUMBERS:
        value = entry.get(name, 1.0)
        if not (_is_number(value) and value > 0):
            return f"{name} must be a positive number, not {_shorten(value)!r}"
    for name in ENTRY_INTERVALS:
        if not _interval(entry.get(name, [0.0, 0.0])):
            return f"{name} must be [low, high] joules, not {_shorten(entry[name])!r}"
    return None


def _interval(value: object) -> bool:
    """Whether ``value`` is [low, high], two numbers from 0 up."""
    return (
        isinstance(value, list) and len(value) == 2 and all(_is_number(v) for v in value)
        and 0 <= value[0] <= value[1]
    )  # fmt: skip


def _is_number(value: object) -> bool:
    """Whether ``value`` is a finite number a float holds (JSON's 1e400 reads as inf, and
    a 400-digit integer overflows the float of every use: the rate, the margin, a refit)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def key_fields(key: str) -> tuple[str, ...] | None:
    """The fields of an entry's key (``KEY_FIELDS``, see ``entry_key``), or None where
    one is missing or empty. A device's name may hold a ``|``: the device is what lies
    between the backend and the last four."""
    parts = key.split("|")
    if len(parts) < len(KEY_FIELDS):
        return None
    fields = (parts[0], "|".join(parts[1:-4]), *parts[-4:])
    return fields if all(fields) else None


def _race_problem(entry: dict[str, Any]) -> str | None:
    """Why the race's fields of an entry are malformed, or None (each is optional)."""
    for name in ("tie", "separated"):
        if not isinstance(entry.get(name, False), bool):
            return f"{name} must be true or false, not {_shorten(entry[name])!r}"
    for name in ("margin", "race_seconds"):
        if not _is_number(entry.get(name, 0.0)):
            return f"{name} must be a number, not {_shorten(entry[name])!r}"
    if not is_count(entry.get("race_samples", 0)):
        return f"race_samples must be a count, not {_shorten(entry['race_samples'])!r}"
    for name in ("interval_s", "runner_up_interval_s"):
        interval = entry.get(name, [0.0, 0.0])
        if not _interval(interval):
            return f"{name} must be [low, high] seconds, not {_shorten(interval)!r}"
    return None


def candidate(params: Mapping[str, int]) -> Candidate:
    """A cache entry's parameters as the tuner's candidate."""
    return geometries.of_entry(params).candidate(params)
