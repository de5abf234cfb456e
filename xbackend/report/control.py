"""The report's control, before any matrix product: each API's own ceilings side by side
on one device, and the audit of what a ratio of two APIs compares (``sweep/fairness.py``).

A ratio of OpenCL's time to CUDA's reads as an API's cost only beside two facts: how the
two APIs compare at the hardware's limit (the same FMA loop, copy and triad, each API's
twin kernels, on the same device: ``backends/ceilings.py``), and whether the two lines
being divided ran the same kernels the same way (the audit ``compare`` wrote as
``fairness.csv`` beside its results). Runs without either have no section.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from xbackend.measuring.timing import rate_text
from xbackend.report.document import Block, Cell, Fold, Heading, Paragraph, Table
from xbackend.report.points import number, three_digits
from xbackend.results import RunHeader
from xbackend.sweep import fairness

# What each API's ceilings hold, as the run header keeps them: a name, its unit, and its
# place in the header's ``ceilings`` (a key, and a dtype under it).
_QUANTITIES = (
    ("FMA loop, float32", "FLOP", ("flops_per_s", "float32")),
    ("FMA loop, float64", "FLOP", ("flops_per_s", "float64")),
    ("copy (the roof)", "B", ("bytes_per_s",)),
    ("triad (BabelStream)", "B", ("triad_bytes_per_s",)),
)


def _read(ceilings: Mapping[str, Any], place: tuple[str, ...]) -> float | None:
    found: Any = ceilings
    for key in place:
        found = found.get(key) if isinstance(found, Mapping) else None
    return number(found)


def _by_kernels(ceilings: Mapping[str, Any]) -> bool:
    """Whether a backend's ceilings were measured by the twin kernels (``fma_loop``,
    ``copy``), not by a library (the CPU backend's NumPy: its BLAS and ``copyto``)."""
    how = ceilings.get("how")
    return isinstance(how, Mapping) and str(how.get("bandwidth", "")).startswith("copy:")


def _shared_devices(run: RunHeader) -> list[list[tuple[str, Mapping[str, Any]]]]:
    """The run's devices whose ceilings two or more of its backends measured by the twin
    kernels: each one's backends with the ceilings they measured there."""
    by_device: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for label, device in run.devices.items():
        ceilings = device.get("ceilings")
        if isinstance(ceilings, Mapping) and device.get("name") and _by_kernels(ceilings):
            by_device.setdefault(str(device["name"]), []).append((label, ceilings))
    return [measured for measured in by_device.values() if len(measured) > 1]


def _side_by_side(measured: list[tuple[str, Mapping[str, Any]]]) -> Table | None:
    """A row per ceiling: each backend's rate, and each later one's over the first's."""
    (first, _), later = measured[0], [label for label, _ in measured[1:]]
    rows = []
    for name, unit, place in _QUANTITIES:
        rates = [_read(ceilings, place) for _, ceilings in measured]
        if all(rate is None for rate in rates):
            continue
        base = rates[0]
        ratios = [three_digits(rate / base) if rate and base else "—" for rate in rates[1:]]
        shown = [rate_text(rate, unit) if rate else "—" for rate in rates]
        rows.append([Cell(name), *map(Cell, shown), *map(Cell, ratios)])
    if not rows:
        return None
    header = ["ceiling", *(label for label, _ in measured), *(f"{b} / {first}" for b in later)]
    return Table(header, rows)


def ceilings_section(runs: Mapping[str, RunHeader]) -> list[Block]:
    """Each device two backends of a run measured: their ceilings side by side."""
    blocks: list[Block] = []
    for run in sorted(runs.values(), key=lambda r: r.timestamp):
        for measured in _shared_devices(run):
            table = _side_by_side(measured)
            if table is None:
                continue
            device = run.devices[measured[0][0]].get("name", "")
            host = f" on {run.host}" if run.host else ""
            blocks += [Paragraph(f"{device}{host}, run {run.run_id}:"), table]
    if not blocks:
        return []
    intro = (
        "Each API's own ceilings, measured on the same device by twin kernels (the same "
        "text in CUDA and OpenCL: kernels/*/ceilings) before the run's first point, each "
        "the best of its timed runs: an FMA loop, a copy (the roofline's roof) and "
        "BabelStream's triad. They are the control for every ratio below: where the APIs "
        "agree here, a larger gap in a matrix product is the kernels' or the launches', "
        "not the hardware's. xbackend ceilings runs BabelStream's four operations and "
        "mixbench's intensity sweep too."
    )
    return [Heading("Each API at the hardware's limit", 2), Paragraph(intro), *blocks]


_KINDS = ("kernel against kernel", "kernel against vendor", "vendor against vendor")


def fairness_section(sources: Sequence[Path]) -> list[Block]:
    """The audit each results folder holds (``fairness.csv``), as a table per folder."""
    blocks: list[Block] = []
    for source in sources:
        folder = source if source.is_dir() else source.parent
        rows = fairness.read_csv(folder)
        if not rows:
            continue
        unfair = sum(row["verdict"] == "UNFAIR" for row in rows)
        first = rows[0]
        blocks.append(
            Paragraph(
                f"{folder}: {first.get('second', '')} against {first.get('first', '')}, as "
                f"planned at {first.get('M')}×{first.get('K')}·{first.get('K')}×"
                f"{first.get('N')}: {len(rows) - unfair} FAIR, {unfair} UNFAIR."
            )
        )
        blocks.append(_audit_table(rows))
    if not blocks:
        return []
    intro = (
        "Before its sweep, compare planned each configuration its first two compiled "
        "backends both run and compared what would run: the steps inside the timed window, "
        "the kernels, each launch's grid and block, the build options beyond each "
        "language's own, and the clock. UNFAIR says why; its ratio compares two "
        "configurations as well as two APIs. The kind says what a ratio of the two lines "
        "compares (" + ", ".join(_KINDS) + "): never a bare 'OpenCL is N× slower'. "
        "'Compiled' is what each API's compiler made of the twin kernels (ptxas's "
        "registers, spills and shared memory; the hot loop's instructions where nvdisasm "
        "is installed): a difference there is the compilers', part of what is compared."
    )
    return [Heading("Fairness: what each ratio of two APIs compares", 2), Paragraph(intro),
            *blocks]  # fmt: skip


def _audit_table(rows: list[dict[str, str]]) -> Fold | Table:
    cells = []
    for row in rows:
        tile = f" T={row['tile']}" if row.get("tile") else ""
        cells.append([
            Cell(f"{row.get('op', '')} {row.get('variant', '')}{tile} {row.get('dtype', '')}"),
            Cell(row.get("kind", "")),
            Cell(row.get("verdict", "")),
            Cell(row.get("reasons", "") or "—", "wrap"),  # long sentences: wrapped
            Cell(row.get("compiled", "") or "—", "wrap"),
        ])  # fmt: skip
    table = Table(["configuration", "kind", "verdict", "why", "compiled"], cells, numeric=False)
    return table if len(cells) <= 12 else Fold(f"The audit ({len(cells)} rows)", [table])
