"""``xbackend ceilings``: each API's own ceilings on its device, side by side.

The control beside every comparison of two APIs: before a matrix product says CUDA is
faster than OpenCL, the same device's limits are measured in each API by kernels that do
nothing else (``backends/ceilings.py``, kernels/*/ceilings): the FMA loop's FLOP/s per
float type, the copy's bytes per second (the roofline's roof) and BabelStream's four
operations (copy, mul, add, triad; in float64, as BabelStream runs them). One row a
quantity, one column a backend with its share of the device's theoretical peak, and
each backend's ratio to the first (docs/ceilings.md). Each is the best of a few runs, on
the API's clock (CUDA events, OpenCL's profiling events).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import xbackend.cli.arguments as arguments
from xbackend.backends.ceilings import (
    FLOAT_DTYPES,
    SWEEP_ROUNDS,
    intensity_sweep,
    stream_dtype,
    stream_rates,
)
from xbackend.backends.peaks import peaks
from xbackend.errors import XBackendError
from xbackend.measuring.timing import rate_text
from xbackend.safeio import atomic_write

Quantities = dict[str, dict[str, Any]]  # quantity -> value, unit, peak, how


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "ceilings",
        help="each API's measured ceilings on its device (FMA, copy, BabelStream), side by side",
        description=__doc__.split("\n\n")[1].replace("\n", " ").replace("%", "%%"),
    )
    parser.add_argument(
        "--backends", default=["cuda", "opencl"], type=arguments.names("backend"),
        help="NAME or NAME:DEVICE, comma-separated; the first is the base of the ratios "
        "(default: cuda,opencl)",
    )  # fmt: skip
    parser.add_argument(
        "--dtypes", default=list(FLOAT_DTYPES), type=arguments.choices("float type", FLOAT_DTYPES),
        help="float types of the FMA loop (default: float32,float64)",
    )  # fmt: skip
    parser.add_argument(
        "--sweep", nargs="?", const=list(SWEEP_ROUNDS), default=None, type=_rounds,
        metavar="ROUNDS", help="also mixbench's intensity sweep in float32: each element "
        "through ROUNDS fused multiply-adds, a comma-separated list (default: "
        + ",".join(map(str, SWEEP_ROUNDS)) + ")",
    )  # fmt: skip
    parser.add_argument("--json", type=Path, default=None, help="also write the tables here")
    parser.set_defaults(func=run)


def _rounds(text: str) -> list[int]:
    """The sweep's rounds: positive integers, at most 4096 (8192 flops an element)."""
    try:
        found = [int(item) for item in arguments.comma_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"rounds are integers, e.g. 1,4,16: {text!r}") from None
    if not found or not all(1 <= count <= 4096 for count in found):
        raise argparse.ArgumentTypeError(f"rounds must be 1 to 4096: {text!r}")
    return found


def measured(backend: Any, dtypes: list[str], sweep: list[int] | None = None) -> Quantities:
    """What ``backend`` measures of its device: the FMA loop per float type it computes
    in, the copy, and (compiled backends) BabelStream's operations in its float64 (in
    float32 on a device without doubles) and the intensity sweep at ``sweep``'s rounds."""
    found = backend.ceilings(dtypes)
    if found is None:
        return {}
    device, quantities = backend.device, {}
    for dtype, rate in found.flops_per_s.items():
        peak = peaks(device, dtype).flops_per_s
        quantities[f"fma {dtype}"] = _row(rate, "FLOP", peak, found.how[dtype])
    bandwidth = peaks(device, "float32").bytes_per_s
    if found.bytes_per_s is not None:
        quantities["copy (roof)"] = _row(found.bytes_per_s, "B", bandwidth, found.how["bandwidth"])
    run_product = getattr(backend, "run_product", None)
    if run_product is not None:
        dtype = stream_dtype(backend.dtype_problem)
        for op, (rate, how) in stream_rates(device, run_product, dtype).items():
            quantities[f"stream {op}"] = _row(rate, "B", bandwidth, how)
        for point in intensity_sweep(device, run_product, "float32", sweep or ()):
            name = f"sweep {point.rounds} ({point.flops_per_byte:g} FLOP/B)"
            quantities[name] = _row(point.flops_per_s, "FLOP", None, point.how)
    return quantities


def _row(value: float, unit: str, peak: float | None, how: str) -> dict[str, Any]:
    return {"value": value, "unit": unit, "peak": peak, "how": how}


def table(columns: dict[str, tuple[str, Quantities]]) -> list[str]:
    """The side-by-side lines: a quantity a row, a backend a column (its value and its
    share of the peak), then each later backend's ratio to the first."""
    labels = list(columns)
    names = list(dict.fromkeys(q for _, quantities in columns.values() for q in quantities))
    head = ["quantity", *(f"{label} ({columns[label][0]})" for label in labels)]
    head += [f"{label}/{labels[0]}" for label in labels[1:]]
    lines = [head]
    for name in names:
        cells = [name]
        for label in labels:
            row = columns[label][1].get(name)
            share = f" ({row['value'] / row['peak']:.0%})" if row and row["peak"] else ""
            cells.append(rate_text(row["value"], row["unit"]) + share if row else "—")
        base = columns[labels[0]][1].get(name)
        for label in labels[1:]:
            row = columns[label][1].get(name)
            cells.append(f"{row['value'] / base['value']:.3f}" if row and base else "—")
        lines.append(cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
            for line in lines]  # fmt: skip


def run(args: argparse.Namespace) -> int:
    import xbackend
    from xbackend.results.plan import Target

    columns: dict[str, tuple[str, Quantities]] = {}
    failed = False
    for name in args.backends:
        target = Target.parse(name)
        try:
            with xbackend.get_backend(target.name, target.device) as backend:
                print(f"{target.label}: measuring on {backend.device.name}", flush=True)
                found = measured(backend, args.dtypes, args.sweep)
                columns[target.label] = (backend.device.name, found)
        except XBackendError as error:
            print(f"{target.label}: not measured: {error}".splitlines()[0], file=sys.stderr)
            failed = True
    if columns:
        print("\n".join(table(columns)))
    if args.json is not None:
        document = {label: {"device": device, "quantities": quantities}
                    for label, (device, quantities) in columns.items()}  # fmt: skip
        atomic_write(args.json, json.dumps(document, indent=1) + "\n")
    return 1 if failed else 0
