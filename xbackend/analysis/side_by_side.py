"""Machines side by side: the same configuration measured on several machines, each
machine's times, and each one's ratio to a base machine with its bootstrap interval.

A machine is a host and a device: two hosts may carry the same GPU, and one host may hold
two devices. A configuration is a point's key less its device (label, operation, variant,
tile, data type, batch, M, K, N): the CUDA tiled kernel at 4096³ on an H100 and on an H200
is one configuration on two machines. A point recorded more than once on one machine
counts as last recorded (``results.latest``: one point per host and key).

The rows are the configurations that more than one machine measured. The base machine is
the first met in the results, or the one asked for (by host, device or name); every
other machine's point is compared with it as ``xbackend diff`` compares B with A
(``diff.compare_pair``: the ratio of medians machine/base of the raw samples, its 95%
bootstrap interval from ``diff.ratio_interval``, and a verdict against the threshold), for
the kernel time and for the end-to-end time. Below 1: faster than the base.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from xbackend.analysis.diff import DEFAULT_THRESHOLD, Comparison, compare_pair
from xbackend.analysis.tables import CORE_VARIANTS
from xbackend.operations import operation
from xbackend.results import PointKey, PointRecord, latest
from xbackend.safeio import atomic_write

CSV_NAME = "machines.csv"
UNKNOWN_HOST = "unknown host"


class Machine(NamedTuple):
    """Where a point was measured: its host and its device's name."""

    host: str
    device: str

    @property
    def name(self) -> str:
        """How tables and figures name it: ``gpu-box · NVIDIA H100 80GB HBM3``."""
        return f"{self.host or UNKNOWN_HOST} · {self.device or 'unknown device'}"


def machine_of(point: PointRecord) -> Machine:
    return Machine(point.host, point.device)


def configuration_of(point: PointRecord) -> PointKey:
    """The point's configuration and size, whatever the device that ran it."""
    return point.key._replace(device="")


@dataclasses.dataclass(frozen=True)
class Side:
    """One machine's point of a configuration, and how it compares with the base's
    (None: the base itself, or a row without a base)."""

    machine: Machine
    point: PointRecord
    kernel: Comparison | None = None
    end_to_end: Comparison | None = None

    def compared(self, time: str) -> Comparison | None:
        return self.kernel if time == "kernel" else self.end_to_end


@dataclasses.dataclass(frozen=True)
class Row:
    """A configuration measured on more than one machine: the base machine's point first
    (where the base host measured it), then the others in the order the hosts were met."""

    configuration: PointKey
    base: Machine | None
    sides: tuple[Side, ...]

    def side(self, machine: Machine) -> Side | None:
        return next((side for side in self.sides if side.machine == machine), None)


def base_machine(points: Sequence[PointRecord], asked: str | None = None) -> Machine | None:
    """The machine the others are compared with: the first met whose host, device or
    name (``host · device``) is ``asked``; without ``asked``, the first machine met. Two
    machines may share a host name (virtual machines often are all ``vm``): a device
    name tells them apart.

    Raises ValueError where no machine of ``points`` is ``asked``, naming those present.
    """
    found = list(dict.fromkeys(machine_of(point) for point in points))
    if asked is None:
        return found[0] if found else None
    for machine in found:
        if asked in (machine.host, machine.device, machine.name):
            return machine
    present = "; ".join(machine.name for machine in found) or "none"
    raise ValueError(f"--base-host {asked}: no results from that machine; present: {present}")


def machines(points: Iterable[PointRecord], base: Machine | None = None) -> list[Machine]:
    """Every machine of ``points``: the base first, then in the order met."""
    found = list(dict.fromkeys(machine_of(point) for point in points))
    return sorted(found, key=lambda machine: machine != base)


def compare_machines(
    points: Iterable[PointRecord],
    *,
    base: str | None = None,
    threshold: float = DEFAULT_THRESHOLD,
) -> list[Row]:
    """Every configuration that more than one machine measured, each machine's point
    compared with the base machine's; sorted by configuration, then by size.

    ``base``: the base machine, by host, device or name (default: the first met); a
    ValueError where no machine is that. ``threshold``: the smallest change a verdict
    claims (``diff``).
    """
    points = latest(points)
    chosen = base_machine(points, base)
    order = {machine: place for place, machine in enumerate(machines(points, chosen))}
    by_configuration: dict[PointKey, dict[Machine, PointRecord]] = {}
    for point in points:
        by_configuration.setdefault(configuration_of(point), {})[machine_of(point)] = point
    rows = []
    for configuration, on in by_configuration.items():
        if len(on) < 2:
            continue
        ordered = sorted(on, key=order.__getitem__)
        row_base = chosen if chosen in on else None
        rows.append(Row(configuration, row_base, _sides(on, ordered, row_base, threshold)))
    return sorted(rows, key=lambda row: sort_key(row.configuration))


def _sides(
    on: dict[Machine, PointRecord],
    ordered: list[Machine],
    base: Machine | None,
    threshold: float,
) -> tuple[Side, ...]:
    sides = []
    for machine in ordered:
        point = on[machine]
        if base is None or machine == base:
            sides.append(Side(machine, point))
            continue
        kernel = compare_pair(on[base], point, threshold, "kernel")
        end_to_end = compare_pair(on[base], point, threshold, "end-to-end")
        sides.append(Side(machine, point, kernel, end_to_end))
    return tuple(sides)


def line_name(configuration: PointKey, label: bool = True) -> str:
    """How tables and figures name a configuration, less its size:
    ``cuda: tiled T=16 (mm, float32)`` (without ``cuda: `` where ``label`` is False)."""
    key = configuration
    try:
        product = operation(key.op).title(key.batch)
    except ValueError:  # an operation this version does not know
        product = key.op
    variant = f"{key.variant} T={key.tile}" if key.tile else key.variant
    name = f"{variant} ({product}, {key.dtype})"
    return f"{key.label}: {name}" if label else name


def size_name(configuration: PointKey) -> str:
    """``4096×4096·4096×4096``, with ``8×`` before it for a batch of 8."""
    key = configuration
    size = f"{key.M}×{key.K}·{key.K}×{key.N}"
    return f"{key.batch}×{size}" if key.batch != 1 else size


def sort_key(configuration: PointKey) -> tuple[object, ...]:
    """Configurations by backend, operation, batch, data type, variant (naive, tiled and
    vendor first), tile, then size."""
    key = configuration
    core = CORE_VARIANTS.index(key.variant) if key.variant in CORE_VARIANTS else len(CORE_VARIANTS)
    line = (key.label, key.op, key.batch, key.dtype, core, key.variant, key.tile or 0)
    return (*line, key.M * key.N * key.K, key.M, key.K, key.N)


# -- the CSV -----------------------------------------------------------------------------------

FIELDS = (
    "label", "op", "variant", "tile", "dtype", "batch", "M", "K", "N",
    "host", "device", "machine", "base", "status",
    "kernel_median_s", "end_to_end_median_s",
    "kernel_ratio", "kernel_ratio_low", "kernel_ratio_high", "kernel_verdict",
    "end_to_end_ratio", "end_to_end_ratio_low", "end_to_end_ratio_high", "end_to_end_verdict",
    "samples", "note",
)  # fmt: skip


def _compared(comparison: Comparison | None, prefix: str) -> dict[str, object]:
    interval = None if comparison is None else comparison.interval
    return {
        f"{prefix}_ratio": None if interval is None else interval.ratio,
        f"{prefix}_ratio_low": None if interval is None else interval.low,
        f"{prefix}_ratio_high": None if interval is None else interval.high,
        f"{prefix}_verdict": "" if comparison is None else comparison.verdict,
    }


def csv_rows(rows: Iterable[Row]) -> list[dict[str, object]]:
    """One flat row of :data:`FIELDS` per machine of each row (None where no value)."""
    found = []
    for row in rows:
        key = row.configuration._asdict()
        del key["device"]
        for side in row.sides:
            notes = [c.note for c in (side.kernel, side.end_to_end) if c is not None and c.note]
            found.append(
                {
                    **key,
                    "host": side.machine.host,
                    "device": side.machine.device,
                    "machine": side.machine.name,
                    "base": "" if row.base is None else row.base.name,
                    "status": side.point.status,
                    "kernel_median_s": side.point.kernel_median_s,
                    "end_to_end_median_s": (side.point.end_to_end_s or {}).get("median"),
                    **_compared(side.kernel, "kernel"),
                    **_compared(side.end_to_end, "end_to_end"),
                    "samples": len(side.point.kept_kernel_samples_s),
                    "note": "; ".join(dict.fromkeys(notes)),
                }
            )
    return found


def write_csv(rows: Iterable[Row], folder: Path) -> Path:
    """``machines.csv`` in ``folder`` (which must exist), written whole."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(FIELDS)
    for values in csv_rows(rows):
        writer.writerow(["" if values[field] is None else values[field] for field in FIELDS])
    path = folder / CSV_NAME
    atomic_write(path, buffer.getvalue())
    return path
