"""The options that say how each point is sampled (see ``timing.Sampling``), shared by
``compare`` and the commands that measure like it."""

from __future__ import annotations

import argparse
from typing import Any

import xbackend.cli.arguments as arguments
from xbackend.timing import CACHE_MODES, HOST_MEMORY, Sampling

_DEFAULT = Sampling()


# A noise target: above 0, under 1000%.
fraction = arguments.share(0.0, 10.0)


def add_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "sampling",
        "Each point takes at least --min-samples samples, then stops once the 95% "
        "interval of its median kernel time lies within ± --max-noise of it and --min-time "
        "of kernel time is measured ('interval'); or, where the interval narrows too slowly "
        "to get there within --timeout, at once ('capped', flagged noisy); or at --timeout "
        "or --samples. Records keep the samples, the noise and the reason.",
    )
    group.add_argument(
        "--samples", type=arguments.bounded_int(1, arguments.MAX_SAMPLES),
        default=_DEFAULT.max_samples, metavar="N",
        help=f"timed samples per point at most (default: {_DEFAULT.max_samples})",
    )  # fmt: skip
    group.add_argument(
        "--min-samples", type=arguments.bounded_int(1, arguments.MAX_SAMPLES),
        default=None, metavar="N",
        help="timed samples per point at least, time allowing "
        f"(default: {_DEFAULT.min_samples}, or --samples where that is fewer)",
    )  # fmt: skip
    group.add_argument(
        "--max-noise", type=fraction, default=_DEFAULT.max_noise, metavar="SHARE",
        help=f"the precision to stop at: the 95%% interval of the median within ± this "
        f"share of it, e.g. 1%% or 0.01 (default: {_DEFAULT.max_noise * 100:g}%%)",
    )  # fmt: skip
    group.add_argument(
        "--noise-of", choices=("kernel", "both"), default=_DEFAULT.noise_of,
        help="whose interval --max-noise applies to: the kernel time's, or both it and the "
        "end-to-end time's (default: kernel)",
    )  # fmt: skip
    group.add_argument(
        "--min-time", type=arguments.non_negative(float), default=_DEFAULT.min_time_s,
        metavar="SECONDS",
        help="kernel time (not transfers) to accumulate before stopping on precision "
        "(default: 0)",
    )  # fmt: skip
    group.add_argument(
        "--timeout", type=arguments.positive(float), default=_DEFAULT.timeout_s,
        metavar="SECONDS",
        help=f"stop sampling a point after this long, transfers included "
        f"(default: {_DEFAULT.timeout_s:g})",
    )  # fmt: skip
    group.add_argument(
        "--short-kernel", type=arguments.non_negative(float), default=_DEFAULT.short_kernel_s,
        metavar="SECONDS",
        help="time a kernel shorter than this as a batch of back-to-back launches, divided "
        f"(default: {_DEFAULT.short_kernel_s:g}; 0: one launch per sample always)",
    )  # fmt: skip
    group.add_argument(
        "--cache", choices=tuple(CACHE_MODES), default=_DEFAULT.cache,
        help="; ".join(f"{name}: {text}" for name, text in CACHE_MODES.items())
        + f" (default: {_DEFAULT.cache})",
    )  # fmt: skip
    group.add_argument(
        "--host-memory", choices=tuple(HOST_MEMORY), default=_DEFAULT.host_memory,
        help="host memory of the end-to-end time's copies: "
        + "; ".join(f"{name}: {text}" for name, text in HOST_MEMORY.items())
        + f" (default: {_DEFAULT.host_memory})",
    )  # fmt: skip


def plan_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The plan's sampling fields from the parsed options."""
    least = args.min_samples
    if least is None:
        least = min(_DEFAULT.min_samples, args.samples)
    elif least > args.samples:
        raise ValueError(f"--min-samples {least} is more than --samples {args.samples}")
    return {
        "samples": args.samples,
        "min_samples": least,
        "max_noise": args.max_noise,
        "noise_of": args.noise_of,
        "min_time_s": args.min_time,
        "timeout_s": args.timeout,
        "cache": args.cache,
        "host_memory": args.host_memory,
        "short_kernel_s": args.short_kernel,
    }
