"""Measure each backend's ceilings and print them beside the theoretical peaks.

    python scripts/ceilings.py                                   # every available backend
    python scripts/ceilings.py --backends cuda,opencl:nvidia --dtypes float32,float64
    python scripts/ceilings.py --repeat 3 --json ceilings.json   # three fresh measurements

The ceilings are what a run keeps in its header (``Backend.ceilings``,
``backends/ceilings.py``): the FMA loop's FLOP/s per float dtype and the copy's bytes per
second (NumPy's BLAS and ``copyto`` on the CPU backend). The peaks are
``backends/peaks.py``'s, derived from what the device says of itself (None: unknown).
One line per device and quantity: measured, peak, the measured share of the peak, the
seconds the measuring took, and how it was measured. Exits 1 if a backend named in
``--backends`` cannot be opened or measured.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import xbackend
from xbackend.backends.peaks import peaks
from xbackend.figures.roofline import rate_text
from xbackend.runner import Target


def _rate(value: float | None, unit: str) -> str:
    return "—" if value is None else rate_text(value, unit)


def _rows(
    label: str, backend: Any, dtypes: list[str], seconds: float, found: Any
) -> list[dict[str, Any]]:
    """One row per quantity of one measurement of one backend."""
    rows = []
    device = backend.device
    quantities = [(dtype, found.flops_per_s.get(dtype)) for dtype in dtypes]
    quantities.append(("bandwidth", found.bytes_per_s))
    for quantity, measured in quantities:
        if measured is None:
            continue
        peak = peaks(device, "float32" if quantity == "bandwidth" else quantity)
        bound = peak.bytes_per_s if quantity == "bandwidth" else peak.flops_per_s
        rows.append(
            {
                "backend": label,
                "device": device.name,
                "quantity": quantity,
                "measured": measured,
                "peak": bound,
                "share": measured / bound if bound else None,
                "seconds": seconds,
                "how": found.how.get(quantity, ""),
            }
        )
    return rows


def _line(row: dict[str, Any]) -> str:
    unit = "B" if row["quantity"] == "bandwidth" else "FLOP"
    share = f"{row['share'] * 100:.0f}%" if row["share"] is not None else "—"
    return (
        f"{row['backend']:<16} {row['device'][:28]:<28} {row['quantity']:<9} "
        f"{_rate(row['measured'], unit):>14} {_rate(row['peak'], unit):>14} {share:>5} "
        f"{row['seconds']:>6.2f} s  {row['how']}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="auto", help="NAME or NAME:DEVICE, comma-separated")
    parser.add_argument("--dtypes", default="float32,float64", help="float dtypes")
    parser.add_argument("--repeat", type=int, default=1, help="fresh measurements of each")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args()
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    auto = args.backends.strip().lower() == "auto"
    names = xbackend.backend_names() if auto else args.backends.split(",")
    print(f"{'backend':<16} {'device':<28} {'quantity':<9} {'measured':>14} {'peak':>14} "
          f"{'share':>5} {'took':>8}  how")  # fmt: skip
    rows: list[dict[str, Any]] = []
    failed = False
    for name in names:
        target = Target.parse(name.strip())
        for _ in range(max(1, args.repeat)):
            try:
                with xbackend.get_backend(target.name, target.device) as backend:
                    start = time.perf_counter()
                    found = backend.ceilings(dtypes)
                    seconds = time.perf_counter() - start
                    if found is None:
                        print(f"{target.label:<16} measures no ceilings")
                        break
                    rows += (new := _rows(target.label, backend, dtypes, seconds, found))
                    for row in new:
                        print(_line(row), flush=True)
            except xbackend.XBackendError as error:
                print(f"{target.label:<16} not measured: {error}".splitlines()[0])
                failed = failed or not auto
                break
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
