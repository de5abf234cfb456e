"""Runs of one plan side by side, from their records (docs/notebook/cluster.md): when the run
started measuring (the header: after the cluster started and the devices' ceilings were
measured) and its first and last point started, seconds apart; how many points and
workers; and the median over points of each backend's end-to-end median, the time that
shows what disturbs the host (a thread spinning, a profiler taking the GIL).

    python scripts/cluster_timeline.py RESULTS_DIR...
"""

from __future__ import annotations

import statistics
import sys
from datetime import datetime

from xbackend.results import load


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def main(folders: list[str]) -> int:
    print("| run | points | workers | header → first point | first → last point | "
          "end-to-end, median over points (by backend) |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- |")
    for folder in folders:
        loaded = load([folder])
        (header,) = loaded.runs.values()
        points = [p for p in loaded.points if p.timestamp]
        starts = sorted(_seconds(p.timestamp) for p in points)
        workers = len({p.worker for p in points if p.worker}) or "serial"
        by_backend: dict[str, list[float]] = {}
        for point in points:
            if point.end_to_end_s is not None:
                by_backend.setdefault(point.backend, []).append(point.end_to_end_s["median"])
        e2e = ", ".join(
            f"{name} {statistics.median(times) * 1e3:.2f} ms"
            for name, times in sorted(by_backend.items())
        )
        print(f"| {folder} | {len(points)} | {workers} | "
              f"{starts[0] - _seconds(header.timestamp):.1f} s | "
              f"{starts[-1] - starts[0]:.1f} s | {e2e} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    raise SystemExit(main(sys.argv[1:]))
