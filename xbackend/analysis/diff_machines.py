"""What ``xbackend diff`` says of the two runs' machines before their points: where their
hosts or devices differ, and where their points were timed in different cache states."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from xbackend.results import PointRecord, RunHeader


def _machines(
    runs: Mapping[str, RunHeader], points: Sequence[PointRecord]
) -> tuple[set[str], dict[str, set[str]]]:
    """The hosts of the runs the points come from, and the device names per label."""
    used = {p.run_id for p in points}
    headers = [run for run_id, run in runs.items() if run_id in used] or list(runs.values())
    hosts = {run.host for run in headers if run.host}
    devices: dict[str, set[str]] = {}
    for run in headers:
        for label, device in run.devices.items():
            name = device.get("name")
            if name:
                devices.setdefault(label, set()).add(str(name))
    for point in points:
        if point.label not in devices:
            devices.setdefault(point.label, set()).add(point.device)
    return hosts, devices


def machine_warning(
    a_runs: Mapping[str, RunHeader],
    a_points: Sequence[PointRecord],
    b_runs: Mapping[str, RunHeader],
    b_points: Sequence[PointRecord],
) -> str | None:
    """One line saying how the machines of A and B differ (hosts, device names), or None."""
    a_hosts, a_devices = _machines(a_runs, a_points)
    b_hosts, b_devices = _machines(b_runs, b_points)
    differences = []
    if a_hosts and b_hosts and a_hosts != b_hosts:
        differences.append(
            f"host {', '.join(sorted(a_hosts))} against {', '.join(sorted(b_hosts))}"
        )
    for label in sorted(set(a_devices) & set(b_devices)):
        if a_devices[label] != b_devices[label]:
            a_names, b_names = sorted(a_devices[label]), sorted(b_devices[label])
            differences.append(f"{label}: {', '.join(a_names)} against {', '.join(b_names)}")
    if not differences:
        return None
    return "A and B ran on different machines (" + "; ".join(differences) + ")"


def cache_warning(a_points: Sequence[PointRecord], b_points: Sequence[PointRecord]) -> str | None:
    """One line where A's points and B's were timed in different cache states, or None."""
    a_modes = sorted({p.cache or "warm" for p in a_points if p.measured})
    b_modes = sorted({p.cache or "warm" for p in b_points if p.measured})
    if not a_modes or not b_modes or a_modes == b_modes:
        return None
    a_text, b_text = "/".join(a_modes), "/".join(b_modes)
    return f"A and B were timed in different cache states ({a_text} in A, {b_text} in B)"
