"""The rows of docs/diff.md's table of CPU A/A pairs (issue 53), from studies/cpu_aa.sh's
folder: per pair, each run's load average as it started, the range of its points'
contention, and diff's verdicts with this checkout's rules.
Usage: python studies/cpu_aa_table.py OUT PAIR [PAIR ...]"""

from __future__ import annotations

import sys
from pathlib import Path

from xbackend import results
from xbackend.analysis import diff
from xbackend.analysis.floors import shipped
from xbackend.cli.diff import _cpu_devices


def _span(values: list[float], form: str) -> str:
    return f"{form.format(min(values))}-{form.format(max(values))}" if values else "—"


def _run(folder: Path) -> tuple[str, results.Loaded]:
    loaded = results.load([folder])
    header = next(iter(loaded.runs.values()))
    load = header.environment.get("host_load", {}).get("load", ["?"])[0]
    loads = [p.host_load or {} for p in loaded.points]
    stall = _span([float(h["stall_share"]) for h in loads if "stall_share" in h], "{:.0%}")
    got = _span([float(h["own_cores"]) for h in loads if "own_cores" in h], "{:.2f}")
    return f"load {load}, stall {stall}, got {got} cores", loaded


def row(out: Path, pair: str) -> str:
    said_a, a = _run(out / f"{pair}_a")
    said_b, b = _run(out / f"{pair}_b")
    cpus = _cpu_devices(a, b)  # as xbackend diff takes them from the headers
    found = diff.compare_points(a.points, b.points, floors=shipped(), cpu_devices=cpus)
    counts = diff.counts(found)
    taken = sum(c.host_differed for c in found)
    kept = sum("the CPU time says" in c.note for c in found)
    verdicts = ", ".join(f"{n} {name}" for name, n in counts.items() if name in diff.VERDICTS)
    return (f"| {pair} | {said_a} | {said_b} | {verdicts} | {taken} taken back, {kept} kept "
            "by the CPU time |")  # fmt: skip


if __name__ == "__main__":
    for name in sys.argv[2:]:
        print(row(Path(sys.argv[1]), name))
