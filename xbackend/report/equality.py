"""The report's last sections: code equality (every wrong result and error in plain sight,
the full log folded away) and the machines every run happened on (folded away: the
command, the kernel sources, the packages, the settings and the devices)."""

from __future__ import annotations

from typing import Any

from xbackend.measuring.timing import format_seconds
from xbackend.operations import OPERATIONS
from xbackend.report.document import (
    Block,
    Cell,
    Fold,
    Heading,
    Items,
    Log,
    Paragraph,
    Table,
    one_line,
)
from xbackend.report.points import bytes_text, line_sort, size_text, three_digits
from xbackend.resources import KERNELS_ENV
from xbackend.results import MEASURED, PointRecord, RunHeader

_FLAGS = {"mismatch": "wrong", "error": "error", "skipped": "skipped"}


def log_line(point: PointRecord) -> Cell:
    tile = f"T={point.tile}" if point.tile else "-"
    parts = [point.label, point.op, point.variant, tile, point.dtype, size_text(point)]
    if point.max_abs_error is not None:
        parts.append(f"max error {point.max_abs_error:.3g}")
    if point.bound_ratio is not None:
        parts.append(f"({point.bound_ratio:.3g} of the tolerance)")
    if point.kernel_median_s is not None:
        parts.append(f"kernel {format_seconds(point.kernel_median_s)}")
    if point.flags:
        parts.append(f"[{', '.join(point.flags)}]")
    if point.status not in MEASURED and point.reason:
        first, *_ = point.reason.strip().splitlines() or [""]
        parts.append(f"— {first}")
    flag = _FLAGS.get(point.status, "") or (
        "untrusted" if point.measured and not point.trusted else ""
    )
    # One line, so that no string can forge a line of the log ("ok ..." under a wrong result).
    return Cell(one_line(" ".join(parts)), flag)


def _counts(name: str, points: list[PointRecord]) -> list[Cell]:
    ok = sum(p.status == "ok" for p in points)
    wrong = sum(p.status == "mismatch" for p in points)
    errors = sum(p.status == "error" for p in points)
    skipped = sum(p.status == "skipped" for p in points)
    ratios = [p.bound_ratio for p in points if p.status == "ok" and p.bound_ratio]
    return [
        Cell(name),
        Cell(f"{ok}/{ok + wrong + errors}", "wrong" if wrong or errors else ""),
        Cell(str(wrong), "wrong" if wrong else ""),
        Cell(str(errors), "error" if errors else ""),
        Cell(str(skipped)),
        Cell(three_digits(max(ratios)) if ratios else "—"),
    ]


def equality(experiments: dict[str, list[PointRecord]]) -> list[Block]:
    blocks: list[Block] = [
        Heading("Code equality", 2),
        Paragraph(
            "Every measured result is compared with a float64 reference, element by "
            "element, within a tolerance of f(K)·eps·(|A|·|B|) (f(K) = K up to 16, 4·√K "
            "beyond; integers exactly); bound ratio is the largest error as a fraction of it."
        ),
    ]
    rows = [_counts(name, points) for name, points in experiments.items()]
    problems = [
        log_line(p)
        for points in experiments.values()
        for p in points
        if p.status in ("mismatch", "error")
    ]
    blocks.append(
        Table(
            ["experiment", "equal/checked", "wrong", "errors", "skipped", "largest bound ratio"],
            rows,
        )
    )
    if problems:
        blocks.append(Paragraph("Wrong results and errors:"))
        blocks.append(Items(problems))
    else:
        blocks.append(Paragraph("No wrong result and no error."))
    for name, points in experiments.items():
        ordered = sorted(points, key=lambda p: line_sort(p.line_key))
        ordered.sort(key=lambda p: p.M * p.N * p.K * p.batch)
        blocks.append(Log(f"{name}: every point ({len(points)})", [log_line(p) for p in ordered]))
    return blocks


def _operations(run: RunHeader) -> str:
    """The operations the run's plan asked for, as tables name them (``bmm ×8``)."""
    known = {name: OPERATIONS[name].title(run.plan.batch) for name in OPERATIONS}
    return ", ".join(known.get(name, name) for name in run.plan.ops)


def _mapping(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one: run headers are read loosely."""
    return value if isinstance(value, dict) else {}


def _facts(run: RunHeader, points: int) -> list[tuple[str, Any]]:
    env = run.environment
    packages = _mapping(env.get("packages"))
    settings = _mapping(env.get("settings"))
    facts = [
        ("command", env.get("command")),
        ("host", env.get("host")),
        ("os", env.get("os")),
        ("cpu", f"{env.get('cpu', '—')} ({env.get('cpu_count', '?')} cores)"),
        ("python", env.get("python")),
        ("xbackend", env.get("xbackend")),
        ("packages", ", ".join(f"{name} {version}" for name, version in packages.items())),
        ("settings", ", ".join(f"{name}={value}" for name, value in settings.items())),
        ("preset", run.plan.preset),
        ("operations", _operations(run)),
        ("dtypes", ", ".join(run.plan.dtypes)),
        ("points", str(points)),
    ]
    if env.get("git_commit"):
        dirty = " (with uncommitted changes)" if env.get("git_dirty") else ""
        facts.append(("git commit", f"{env['git_commit']}{dirty}"))
    return facts


def _devices(run: RunHeader) -> Table:
    rows = []
    for label, device in run.devices.items():
        driver = str(device.get("driver_version") or "—")
        if device.get("runtime_version"):
            driver += f" / {device['runtime_version']}"
        rows.append(
            [
                Cell(label),
                Cell(str(device.get("name") or "—")),
                Cell(str(device.get("platform") or "—")),
                Cell(driver),
                Cell(bytes_text(device.get("global_mem_bytes"))),
                Cell(str(device.get("compute_units") or "—")),
                Cell(bytes_text(device.get("local_mem_bytes"))),
            ]
        )
    header = ["device", "name", "platform", "driver / runtime", "memory", "compute units"]
    return Table([*header, "local memory"], rows, numeric=False)


def _kernel_sources(run: RunHeader) -> str:
    """Where the run's kernels came from, with their digests where its header keeps them
    (``environment["kernels"]``: a name for each, a digest or an object with one)."""
    env = run.environment
    kept = _mapping(env.get("kernels"))
    digests = [
        f"{name} {_mapping(value).get('digest', value) if isinstance(value, dict) else value}"
        for name, value in kept.items()
    ]
    folder = _mapping(env.get("settings")).get(KERNELS_ENV)
    where = f"{KERNELS_ENV}={folder}" if folder else f"shipped with xbackend {env.get('xbackend')}"
    return f"{where}; " + ("; ".join(digests) if digests else "no digests in the run header")


def machines(runs: dict[str, RunHeader], points: list[PointRecord]) -> list[Block]:
    """Each run's command, machine, kernels, packages and devices, folded away under a
    line that names the run, its host and its CPU."""
    blocks: list[Block] = [Heading("Machines", 2)]
    for run_id, run in sorted(runs.items(), key=lambda item: item[1].timestamp):
        facts = _facts(run, sum(p.run_id == run_id for p in points))
        facts.insert(2, ("kernel sources", _kernel_sources(run)))
        rows = [[Cell(name), Cell(str(value))] for name, value in facts if value not in (None, "")]
        folded: list[Block] = [Table(["setting", "value"], rows, numeric=False)]
        if run.devices:
            folded.append(_devices(run))
        env = run.environment
        summary = (
            f"{env.get('host') or 'host unknown'}, {env.get('cpu') or 'CPU unknown'}: the "
            "command, kernel sources, packages, settings and devices"
        )
        blocks += [
            Heading(f"Run {run_id}, {run.timestamp}", 3),
            Fold(summary, folded, in_place=True),
        ]
    orphans = sum(p.run_id not in runs for p in points)
    if orphans:
        blocks.append(Paragraph(f"{orphans} points come from runs without a run header."))
    return blocks
