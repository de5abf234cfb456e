"""The selection options every command that runs products shares (``compare``,
``limits``, ``profile``): which backends, variants, tiles, operations, element types,
sizes, the seed of the inputs, and where the results go. One definition, so that
``--variants tiled --tile 8,16`` means the same to each command, with the same help and
the same errors.

Defaults are ``None`` here (the seed's is 0): each command says what nothing means to it
(``compare`` follows its preset; ``limits`` grows each backend's preferred variant).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import xbackend.cli.arguments as arguments
from xbackend import backend_names
from xbackend.sweep.configs import VARIANT_SETS

GROUP_TITLE = "selection (the same for compare, limits and profile)"
SIZES_HELP = "explicit sizes: MxK (A is M×K, B is K×M) or MxKxN, comma-separated"


def add_options(
    parser: argparse.ArgumentParser, *, out: str, sizes: str | None = None
) -> argparse._MutuallyExclusiveGroup | None:
    """Add ``--backends``, ``--variants``, ``--tile``, ``--op``, ``--dtype``, ``--seed``,
    ``--out`` and, where ``sizes`` gives its help, ``--sizes``; ``out`` names the default
    folder.

    Returns the group ``--sizes`` is in, mutually exclusive, so that a command can add
    another way of choosing sizes beside it (``compare``'s ``--base``); None without
    ``--sizes``.
    """
    group = parser.add_argument_group(GROUP_TITLE)
    group.add_argument(
        "--backends", default="auto", metavar="LIST",
        help="comma-separated NAME or NAME:DEVICE (device index or a piece of its name), "
        f"from: {', '.join(backend_names())}; 'auto' (default) is every available backend",
    )  # fmt: skip
    group.add_argument(
        "--variants", type=arguments.names("variants"), default=None, metavar="LIST",
        help="variants to run, e.g. naive,tiled, or a set: "
        + "; ".join(f"'{name}': {text}" for name, text in VARIANT_SETS.items()),
    )  # fmt: skip
    group.add_argument(
        "--kernels", action="append", default=None, metavar="DIR",
        help="a folder of your own kernels (a family.toml beside .cu/.cl files, or "
        "folders of them: docs/kernels.md); their variants run beside naive, tiled and "
        "vendor. Repeat for several folders",
    )  # fmt: skip
    group.add_argument(
        "--tile", type=arguments.tiles, default=None, metavar="LIST",
        help="tile sizes for the variants that take one, e.g. 16 or 8,16,32 "
        "(default: each variant's default, 16 on GPUs)",
    )  # fmt: skip
    group.add_argument(
        "--op", type=arguments.ops, default=None, metavar="LIST",
        help="operations: mm (default), bmm (batched), rmm (reduced), comma-separated",
    )  # fmt: skip
    group.add_argument(
        "--dtype", type=arguments.dtypes, default=None, metavar="LIST",
        help="element types: float32 (default), int32, float64, comma-separated",
    )  # fmt: skip
    group.add_argument(
        "--seed", type=arguments.bounded_int(0, arguments.MAX_SEED), default=0,
        help="seed of the random inputs (default: 0)",
    )  # fmt: skip
    group.add_argument("--out", type=Path, default=None, help=f"output folder (default: {out})")
    if sizes is None:
        return None
    exclusive = group.add_mutually_exclusive_group()
    exclusive.add_argument(
        "--sizes", type=arguments.shapes, default=None, metavar="LIST", help=sizes
    )
    return exclusive
