"""The options that say how each point is sampled: one ``timing.Sampling``, built here
from the command line and carried whole to the sampler (``Plan.sampling``).

Each option is one row of ``OPTIONS`` (its flag, the field of ``Sampling`` it sets, its
type and its help); a preset (``--fast``, ``--rigorous``: ``timing.PRESETS``) is the
base the options given change. A new option is a field of ``Sampling`` and a row here.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from typing import Any

import xbackend.cli.arguments as arguments
from xbackend.measuring.timing import CACHE_MODES, HOST_MEMORY, PRESETS, Sampling

_DEFAULT = Sampling()

# A noise target: above 0, under 1000%.
fraction = arguments.share(0.0, 10.0)


@dataclasses.dataclass(frozen=True)
class Option:
    """A sampling flag: the ``Sampling`` field it sets, how its value is read, its help."""

    flag: str
    field: str
    help: str
    type: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None
    metavar: str | None = None


def _default(name: str) -> str:
    value = getattr(_DEFAULT, name)
    return (
        f"{value * 100:g}%"
        if name == "max_noise"
        else f"{value:g}"
        if isinstance(value, float)
        else str(value)
    )


OPTIONS = (
    Option("--warmup", "warmup", "untimed runs after the first, checked run",
           arguments.bounded_int(0, arguments.MAX_WARMUP), metavar="N"),
    Option("--samples", "max_samples", "timed samples per point at most",
           arguments.bounded_int(1, arguments.MAX_SAMPLES), metavar="N"),
    Option("--min-samples", "min_samples", "timed samples per point at least, time allowing "
           "(at most --samples)", arguments.bounded_int(1, arguments.MAX_SAMPLES), metavar="N"),
    Option("--max-noise", "max_noise", "the precision to stop at: the 95%% interval of the "
           "median within ± this share of it, e.g. 1%% or 0.01", fraction, metavar="SHARE"),
    Option("--noise-of", "noise_of", "whose interval --max-noise applies to: the kernel "
           "time's, or both it and the end-to-end time's", choices=("kernel", "both")),
    Option("--min-time", "min_time_s", "kernel time (not transfers) to accumulate before "
           "stopping on precision", arguments.non_negative(float), metavar="SECONDS"),
    Option("--timeout", "timeout_s", "stop sampling a point after this long, transfers "
           "included", arguments.positive(float), metavar="SECONDS"),
    Option("--short-kernel", "short_kernel_s", "time a kernel shorter than this as a batch "
           "of back-to-back launches, divided (0: one launch per sample always)",
           arguments.non_negative(float), metavar="SECONDS"),
    Option("--energy", "energy_s", "after each point's samples, launch its product back to "
           "back for this long, between two steps of the GPU's energy counter (NVML): joules "
           "per product, GFLOP/J (0: off)", arguments.non_negative(float), metavar="SECONDS"),
    Option("--cache", "cache", "; ".join(f"{name}: {text}" for name, text in CACHE_MODES.items()),
           choices=tuple(CACHE_MODES)),
    Option("--host-memory", "host_memory", "host memory of the end-to-end time's copies: "
           + "; ".join(f"{name}: {text}" for name, text in HOST_MEMORY.items()),
           choices=tuple(HOST_MEMORY)),
)  # fmt: skip


def add_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "sampling",
        "Each point takes at least --min-samples samples, then stops once the 95% "
        "interval of its median kernel time lies within ± --max-noise of it and --min-time "
        "of kernel time is measured ('interval'); or, where the interval narrows too slowly "
        "to get there within --timeout, at once ('capped', flagged noisy); or at --timeout "
        "or --samples. Records keep the samples, the noise and the reason.",
    )
    presets = group.add_mutually_exclusive_group()
    for name, preset in PRESETS.items():
        presets.add_argument(
            f"--{name}", dest="sampling_preset", action="store_const", const=name,
            help=f"start from the {name} preset ({_described(preset)}); the options "
            "below change it".replace("%", "%%"),
        )  # fmt: skip
    for option in OPTIONS:
        group.add_argument(
            option.flag, dest=option.field, type=option.type or str, choices=option.choices,
            default=None, metavar=option.metavar,
            help=f"{option.help} (default: {_default(option.field).replace('%', '%%')})",
        )  # fmt: skip


def _described(preset: Sampling) -> str:
    return (f"{preset.min_samples} to {preset.max_samples} samples, ±{preset.max_noise:.1%}, "
            f"{preset.timeout_s:g} s at most")  # fmt: skip


def sampling_of(args: argparse.Namespace) -> Sampling:
    """The sampling the options ask for: the preset's (else the default), each option
    given replacing its field. Fewer samples at most than at least is an error."""
    base = PRESETS[args.sampling_preset] if getattr(args, "sampling_preset", None) else _DEFAULT
    given = {
        o.field: getattr(args, o.field) for o in OPTIONS if getattr(args, o.field, None) is not None
    }
    if "max_samples" in given and "min_samples" not in given:
        given["min_samples"] = min(base.min_samples, given["max_samples"])
    sampling = dataclasses.replace(base, **given)
    if sampling.min_samples > sampling.max_samples:
        raise ValueError(
            f"--min-samples {sampling.min_samples} is more than --samples {sampling.max_samples}"
        )
    return sampling
