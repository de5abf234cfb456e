"""The plan as a run header records it: every field of its sampling comes back."""

from __future__ import annotations

import dataclasses
import json
import typing

import numpy as np

from xbackend.measuring import timing
from xbackend.measuring.timing import Sampling
from xbackend.operations import Shape
from xbackend.results.plan import Plan


def _other_text(base: Sampling, name: str) -> str:
    """A value of text field ``name`` that ``Sampling`` accepts and is not its default:
    free text if any text is accepted, else one of the module's named choices."""
    named = [
        key
        for table in vars(timing).values()
        if isinstance(table, dict | tuple)
        for key in table
        if isinstance(key, str)
    ]
    for candidate in ["free text", "both", *named]:
        if candidate == getattr(base, name):
            continue
        try:
            changed: dict[str, typing.Any] = {name: candidate}
            dataclasses.replace(base, **changed)
        except ValueError:
            continue
        return candidate
    raise AssertionError(f"no value other than the default found for Sampling.{name}")


def _every_field_changed(rng: np.random.Generator) -> Sampling:
    base = Sampling()
    types = typing.get_type_hints(Sampling)
    values: dict[str, object] = {}
    for field in dataclasses.fields(Sampling):
        kind, default = types[field.name], getattr(base, field.name)
        if kind is int:
            values[field.name] = default + int(rng.integers(1, 50))
        elif kind is float:
            values[field.name] = default + float(rng.uniform(0.01, 5.0))
        elif kind is str:
            values[field.name] = _other_text(base, field.name)
        else:
            raise AssertionError(f"Sampling.{field.name}: a type this test does not vary")
    sampling = Sampling(**values)  # type: ignore[arg-type]
    assert all(
        getattr(sampling, f.name) != getattr(base, f.name) for f in dataclasses.fields(Sampling)
    )
    return sampling


def test_every_sampling_field_round_trips_through_a_run_header():
    """Issue 55: ``--energy 0.5`` came back as 0.0, its field missing from a list by hand."""
    rng = np.random.default_rng(55)
    for _ in range(3):
        sampling = _every_field_changed(rng)
        plan = Plan(shapes=[Shape(8, 4, 8)], seed=int(rng.integers(1, 1000)), sampling=sampling)
        again = Plan.from_dict(json.loads(json.dumps(plan.to_dict())))
        for field in dataclasses.fields(Sampling):
            assert getattr(again.sampling, field.name) == getattr(sampling, field.name), field.name
        assert again == plan


def test_energy_seconds_round_trip():
    plan = Plan(shapes=[Shape(7, 33, 65)], sampling=Sampling(energy_s=0.5))
    assert Plan.from_dict(plan.to_dict()).sampling.energy_s == 0.5


def test_a_sampling_field_of_a_bad_value_takes_its_default():
    """Read loosely, as the rest of the plan: a wrong type or a value ``Sampling`` refuses."""
    base = Sampling()
    recorded = {
        **base.to_dict(),
        "energy_s": "half",
        "cache": "lukewarm",
        "warmup": -3,
        "max_noise": True,
    }
    read = Plan.from_dict({"shapes": [[8, 4, 8]], "sampling": recorded}).sampling
    assert read == base


def test_an_older_header_gets_the_older_meaning():
    """Before batches every sample was one launch; before ``sampling`` the plan held its fields."""
    read = Plan.from_dict({"shapes": [[8, 4, 8]], "samples": 17, "warmup": 3}).sampling
    assert (read.max_samples, read.warmup, read.short_kernel_s, read.energy_s) == (17, 3, 0.0, 0.0)
