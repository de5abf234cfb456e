"""Nsight Compute (``ncu``) as ``xbackend profile`` drives it: where it is, its version,
its settings, the two command lines (profile into a report file; print the report as
CSV), and the CSV read back into one row per kernel, in base units.

ncu profiles a program: it runs ``python -m xbackend.profiling.child SPEC`` with every
kernel launch replayed until each metric is collected. The report file (``.ncu-rep``)
keeps what it measured for Nsight Compute's own viewer; ``--import`` prints it as CSV,
apart from anything the child printed. ``--print-units base`` asks for base units
(bytes, nanoseconds, counts), and :func:`to_base` converts whatever unit a value comes in
(ncu's automatic units are "Kbyte", "Mbyte", "usecond", "msecond", ...), so a CSV printed
either way reads the same.

The settings are recorded with the results: ``--clock-control none`` by default (ncu's
own default, ``base``, locks the clocks to the base clock: 23% slower kernels on an H100
at 4096³) and ``--cache-control all`` (ncu's default: the caches are flushed before each
kernel, so every kernel starts cold and its DRAM bytes are its own).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from xbackend.profiling.metrics import METRICS

DEFAULT_PATH = "/usr/local/cuda/bin/ncu"
CLOCK_CONTROLS = {
    "none": "the GPU's clocks left alone, as in every other measurement (default)",
    "base": "ncu locks the clocks to base for each kernel (ncu's own default)",
}
CACHE_CONTROLS = {
    "all": "the caches flushed before each kernel: each starts cold (ncu's default)",
    "none": "the caches kept: a kernel finds what the upload and the kernels before it left",
}
_VERSION = re.compile(r"Version\s+(\S+)")
# Units of time ncu prints; sizes and counts take SI prefixes (Kbyte, Msector, ...).
_TIME_UNITS = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0, "ns": 1e-9,
               "us": 1e-6, "ms": 1e-3, "s": 1.0}  # fmt: skip
_PREFIXES = {"": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
             "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}  # fmt: skip
_COUNTED = ("byte", "sector", "request", "warp", "inst", "cycle", "thread", "block", "")
_NOT_A_VALUE = ("", "n/a", "(!) n/a", "N/A")


class ProfileError(ValueError):
    """What Nsight Compute gave cannot be read, or cannot be matched to the points run."""


@dataclasses.dataclass(frozen=True)
class Settings:
    """How ncu profiles: recorded in the run header with its version and path."""

    clock_control: str = "none"
    cache_control: str = "all"
    metrics: tuple[str, ...] = METRICS

    def __post_init__(self) -> None:
        if self.clock_control not in CLOCK_CONTROLS:
            raise ValueError(f"clock control {self.clock_control!r}: expected none or base")
        if self.cache_control not in CACHE_CONTROLS:
            raise ValueError(f"cache control {self.cache_control!r}: expected all or none")

    @property
    def cache_mode(self) -> str:
        """The cache mode of xbackend's records (``timing.CACHE_MODES``) this setting is."""
        return "cold" if self.cache_control == "all" else "warm"

    def options(self) -> list[str]:
        return [
            "--metrics", ",".join(self.metrics),
            "--clock-control", self.clock_control,
            "--cache-control", self.cache_control,
        ]  # fmt: skip


@dataclasses.dataclass(frozen=True)
class KernelRow:
    """One kernel ncu profiled: its place in launch order, its name and its metrics."""

    id: int
    name: str
    metrics: dict[str, float]

    @property
    def function(self) -> str:
        """The kernel's function name, without a parameter list ncu may print."""
        return self.name.split("(", 1)[0].strip().removeprefix("void ").strip()


def find(given: str | None) -> str | None:
    """The ncu to run: ``given`` (``--ncu``), else on PATH, else CUDA's usual place."""
    for candidate in (given,) if given else ("ncu", DEFAULT_PATH):
        found = shutil.which(candidate)
        if found:
            return found
    return None


def version(ncu: str) -> str:
    """ncu's version, from ``ncu --version`` ("2025.3.1.0"); its last line if it names none."""
    done = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60)
    text = done.stdout + done.stderr
    found = _VERSION.search(text)
    if found:
        return found.group(1)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if done.returncode != 0 or not lines:
        raise ProfileError(f"{ncu} --version failed: {text.strip()[:300] or done.returncode}")
    return lines[-1]


def profile_command(
    ncu: str, settings: Settings, report: Path, program: Sequence[str]
) -> list[str]:
    """ncu profiling ``program`` into ``report`` (every kernel of every process)."""
    return [ncu, "--export", str(report), "--force-overwrite", "--target-processes", "all",
            *settings.options(), *program]  # fmt: skip


def import_command(ncu: str, report: Path) -> list[str]:
    """ncu printing ``report`` as CSV: one row a kernel, one column a metric, base units."""
    return [ncu, "--import", str(report), "--csv", "--page", "raw", "--print-units", "base"]


def to_base(text: str, unit: str) -> float | None:
    """A value as ncu prints it ("1,234.5" in "Mbyte") in base units (1234500000.0 bytes;
    time in seconds); None where ncu has none ("n/a")."""
    text = text.strip()
    if text in _NOT_A_VALUE:
        return None
    try:
        number = float(text.replace(",", ""))
    except ValueError:
        raise ProfileError(f"ncu printed {text!r:.40} where a number belongs") from None
    return number * scale(unit)


def scale(unit: str) -> float:
    """What one ``unit`` is in base units: 1e6 for "Mbyte", 1e-6 for "usecond"."""
    unit = unit.strip()
    if unit in _TIME_UNITS:
        return _TIME_UNITS[unit]
    if unit == "%":
        return 1.0
    for prefix in sorted(_PREFIXES, key=len, reverse=True):
        if unit.startswith(prefix) and unit[len(prefix) :] in _COUNTED:
            rest = unit[len(prefix) :]
            if rest or not prefix:  # a bare prefix is no unit
                return _PREFIXES[prefix]
    raise ProfileError(f"ncu printed a unit xbackend does not know: {unit!r:.40}")


def parse_csv(text: str, metrics: Sequence[str] = METRICS) -> list[KernelRow]:
    """The kernels of ncu's CSV, in launch order, with the ``metrics`` asked for: the
    ``raw`` page (a column per metric, a row of units under the header; other columns,
    such as the device's attributes, are left) or the ``details`` page (a row per metric)."""
    start = text.find('"ID"')
    if start < 0:
        raise ProfileError("ncu printed no CSV table (no kernel was profiled?)")
    rows = list(csv.reader(io.StringIO(text[start:])))
    header, body = rows[0], [row for row in rows[1:] if row]
    for needed in ("ID", "Kernel Name"):
        if needed not in header:
            raise ProfileError(f"ncu's CSV has no {needed!r} column")
    wanted = set(metrics)
    if "Metric Name" in header:
        kernels = _long_rows(header, body, wanted)
    else:
        kernels = _wide_rows(header, body, wanted)
    return sorted(kernels, key=lambda kernel: kernel.id)


def _cells(header: list[str], row: list[str]) -> dict[str, str]:
    if len(row) != len(header):
        raise ProfileError(f"a row of ncu's CSV has {len(row)} cells, its header {len(header)}")
    return dict(zip(header, row, strict=True))


def _kernel_id(cells: dict[str, str]) -> int:
    try:
        return int(cells["ID"].replace(",", ""))
    except ValueError:
        raise ProfileError(f"ncu's CSV has a kernel ID {cells['ID']!r:.20}") from None


def _wide_rows(header: list[str], body: list[list[str]], wanted: set[str]) -> list[KernelRow]:
    """The raw page: the first row under the header holds the units (its ID is empty)."""
    units = {name: "" for name in header}
    if body and _cells(header, body[0])["ID"] == "":
        units = _cells(header, body[0])
        body = body[1:]
    metrics = [name for name in header if name in wanted]
    if not metrics:
        raise ProfileError(f"ncu's CSV has none of the metrics asked for ({', '.join(wanted)})")
    kernels = []
    for row in body:
        cells = _cells(header, row)
        values = {name: to_base(cells[name], units[name]) for name in metrics}
        kernels.append(
            KernelRow(
                _kernel_id(cells),
                cells["Kernel Name"],
                {name: v for name, v in values.items() if v is not None},
            )
        )
    return kernels


def _long_rows(header: list[str], body: list[list[str]], wanted: set[str]) -> list[KernelRow]:
    """The details page: one row per (kernel, metric)."""
    for needed in ("Metric Unit", "Metric Value"):
        if needed not in header:
            raise ProfileError(f"ncu's CSV has no {needed!r} column")
    found: dict[int, tuple[str, dict[str, float]]] = {}
    for row in body:
        cells = _cells(header, row)
        _, metrics = found.setdefault(_kernel_id(cells), (cells["Kernel Name"], {}))
        if cells["Metric Name"] not in wanted:
            continue
        number = to_base(cells["Metric Value"], cells["Metric Unit"])
        if number is not None:
            metrics[cells["Metric Name"]] = number
    return [KernelRow(id, name, metrics) for id, (name, metrics) in found.items()]


def described(
    ncu: str, ncu_version: str, settings: Settings, command: Sequence[str]
) -> dict[str, Any]:
    """What the run header keeps of the profiler: which, how, and the command it ran."""
    return {
        "tool": "Nsight Compute",
        "version": ncu_version,
        "path": ncu,
        "clock_control": settings.clock_control,
        "cache_control": settings.cache_control,
        "metrics": list(settings.metrics),
        "command": " ".join(command),
    }
