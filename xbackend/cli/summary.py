"""The summary table ``compare`` and ``plot`` print: one row per line of the comparison."""

from __future__ import annotations

from xbackend.analysis.joules import gflops_per_joule
from xbackend.measuring import host_load
from xbackend.measuring.launched import names
from xbackend.measuring.timing import format_seconds
from xbackend.problems import FREIVALDS
from xbackend.results import MEASURED, LineKey, PointRecord
from xbackend.safeio import printable

_HEADER = ("backend", "device", "op", "variant", "tile", "dtype", "equal", "skipped",
           "largest verified", "kernel", "noise", "end-to-end", "GFLOP/s")  # fmt: skip


def _row(key: LineKey, group: list[PointRecord]) -> tuple[str, ...]:
    measured = [p for p in group if p.status in MEASURED]
    good = [p for p in group if p.status == "ok"]
    failed = [p for p in group if p.status == "error"]
    skipped = len(group) - len(measured) - len(failed)
    equal = f"{len(good)}/{len(measured) + len(failed)}"
    size = kernel = noise = end_to_end = gflops = "—"
    top = _largest(group)
    if top is not None:
        batch = f"{top.batch}×" if top.batched else ""
        size = f"{batch}{top.M}×{top.K}·{top.K}×{top.N}"
        kernel = format_seconds((top.kernel_s or {})["median"])
        noise = _noise(top, group)
        # A profiled point (xbackend profile) times its kernels alone: no end-to-end.
        end_to_end = format_seconds(top.end_to_end_s["median"]) if top.end_to_end_s else "—"
        gflops = f"{top.gflops:.4g}"
    # Names come from the results file: shown, never obeyed (an ESC sequence is text).
    label, device, op, variant, dtype = map(
        printable, (key.label, key.device, key.op, key.variant, key.dtype)
    )
    return (label, device[:28], op, variant, str(key.tile or "—"), dtype,
            equal, str(skipped), size, kernel, noise, end_to_end, gflops)  # fmt: skip


def _largest(group: list[PointRecord]) -> PointRecord | None:
    """The line's largest verified point, whose numbers the row shows."""
    good = [p for p in group if p.status == "ok"]
    return max(good, key=lambda p: (p.flops, p.M)) if good else None


def _energy_cell(group: list[PointRecord]) -> str:
    top = _largest(group)
    value = gflops_per_joule(top) if top is not None else None
    return "—" if value is None else f"{value:.4g}"


def _noise(top: PointRecord, group: list[PointRecord]) -> str:
    """The largest point's relative noise, and how many of the line's points are noisy
    (the interval of the median wider than ±2.5%) or flagged as impossible."""
    stats = top.kernel_s or {}
    if "noise" not in stats:
        return "—"
    text = f"{stats['noise']:.1%}"
    noisy = sum("noisy" in p.flags for p in group)
    impossible = sum(p.measured and not p.trusted for p in group)
    if noisy:
        text += f" ({noisy} noisy)"
    if impossible:
        text += f" ({impossible} above peak)"
    return text


def summary_table(points: list[PointRecord]) -> str:
    """One row per line of the comparison: verified points, largest size, speed (and,
    where ``--energy`` measured it, the largest point's GFLOP per joule)."""
    groups: dict[LineKey, list[PointRecord]] = {}
    for point in points:
        groups.setdefault(point.line_key, []).append(point)
    rows = [_HEADER, *(_row(key, group) for key, group in groups.items())]
    if any(gflops_per_joule(p) is not None for p in points):
        rows = [
            (*_HEADER, "GFLOP/J"),
            *(
                (*row, _energy_cell(group))
                for row, group in zip(rows[1:], groups.values(), strict=True)
            ),
        ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    lines += _skip_notes(groups) + _vendor_notes(groups) + _blas_notes(groups)
    lines += _under_notes(groups)
    all_measured = [p for p in points if p.status in ("ok", "mismatch", "error")]
    verdict = sum(p.status == "ok" for p in all_measured)
    sketched = sum(p.check == FREIVALDS for p in all_measured)
    how = f" ({sketched} of them by Freivalds' check)" if sketched else ""
    lines.append(
        f"\ncode equality: {verdict}/{len(all_measured)} measured points equal "
        f"to the float64 reference within the tolerance{how}"
    )
    noisy = [p.host_load for p in all_measured if "noisy" in p.flags]
    lines += host_load.sentences([p.host_load for p in all_measured], noisy)
    return "\n".join(lines)


def _skip_notes(groups: dict[LineKey, list[PointRecord]], width: int = 110) -> list[str]:
    """Under the table: each line's skipped points and the first reason, shortened."""
    notes = []
    for key, group in groups.items():
        skipped = [p for p in group if p.status == "skipped"]
        if not skipped:
            continue
        tile = f" T={key.tile}" if key.tile else ""
        what = printable(f"{key.label} {key.op} {key.variant}{tile} {key.dtype}")
        count = "all" if len(skipped) == len(group) else f"{len(skipped)} of {len(group)}"
        reason = printable(skipped[0].reason.splitlines()[0] if skipped[0].reason else "")
        note = f"  {what}: {count} skipped: {reason}"
        notes.append(note if len(note) <= width else note[: width - 1] + "…")
    return ["", "skipped (the first reason of each line):", *notes] if notes else []


def _under_notes(groups: dict[LineKey, list[PointRecord]]) -> list[str]:
    """Under the table: the rows whose end-to-end time reads under their kernel time, and
    why (the kernel time is a batch's mean, run after the product: sampler.py)."""
    under = []
    for key, group in groups.items():
        top = _largest(group)
        if top is None or top.launches <= 1 or not top.kernel_s or not top.end_to_end_s:
            continue
        if top.end_to_end_s["median"] < top.kernel_s["median"]:
            under.append(printable(f"{key.label} {key.op} {key.variant}"))
    if not under:
        return []
    return [f"\nend-to-end under the kernel time ({', '.join(under)}): there the kernel time is "
            "the mean of a batch of launches run after the product the end-to-end time is of, "
            "and the batch ran slower per launch"]  # fmt: skip


def _blas_notes(groups: dict[LineKey, list[PointRecord]]) -> list[str]:
    """Under the table: the threads each CPU vendor line's BLAS ran on, as many as the host
    left it at each point (``host_load.cores_left``), where its points recorded them."""
    notes = []
    for key, group in groups.items():
        threads = sorted({int((p.host_load or {})["blas_threads"]) for p in group
                          if "blas_threads" in (p.host_load or {})})  # fmt: skip
        if threads:
            span = str(threads[0]) if len(threads) == 1 else f"{threads[0]}-{threads[-1]}"
            what = printable(f"{key.label} {key.op} {key.variant} {key.dtype}")
            plural = "s" * (span != "1")
            notes.append(f"  {what}: the BLAS on {span} thread{plural}, as many as the host "
                         "left it at each point (other jobs' cores taken away)")  # fmt: skip
    return ["\nthe BLAS's threads:", *notes] if notes else []


def _vendor_notes(groups: dict[LineKey, list[PointRecord]]) -> list[str]:
    """Under the table: the kernels each vendor line launched at its largest verified point,
    as the device's tracer recorded them (``measuring/launched.py``)."""
    notes = []
    for key, group in groups.items():
        top = _largest(group)
        seen = names((top.state or {}).get("vendor_kernels")) if top is not None else ""
        if top is not None and seen:
            what = printable(f"{key.label} {key.op} {key.variant} {key.dtype} at {top.M}×{top.K}"
                             f"·{top.K}×{top.N}")  # fmt: skip
            notes.append(f"  {what} launched {printable(seen)}")
    return ["\nthe vendor's kernels:", *notes] if notes else []
