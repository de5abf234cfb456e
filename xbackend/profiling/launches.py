"""Which kernels belong to which point: the child's manifest, matched to ncu's rows.

The child (``child.py``) runs each point's product once, in order, and writes a
manifest: each point's record (checked against the reference, or skipped, or failed, but
not timed), the function its variant launches first, and whether it ran. Every run of a
product on the CUDA backend begins with the hold kernel (``kernels/cuda/hold.cu``; see
``backends/cuda.py``), so in ncu's rows, in launch order, each ``hold`` opens one
product's run, and the rows up to the next hold are its kernels: one for the fixed-tile
variants, two for a tuned one split along K, cuBLAS's own for the vendor line. The holds
themselves are left out of every count. Where the runs ncu saw and the products the child
ran differ in number, or a run's first kernel is not its variant's, the profile is an
error, never a guess.

A matched point's record gets ncu's counters of its kernels (``metrics.combined``), and
its kernel time: their summed ``gpu__time_duration``, one sample, timed by the clock
``nsight-compute`` (``results.records.PROFILER_CLOCK``), with no end-to-end time.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from xbackend.measuring.timing import Stats
from xbackend.profiling.metrics import DURATION, combined
from xbackend.profiling.ncu import KernelRow, ProfileError, Settings
from xbackend.results import PointRecord
from xbackend.results.records import PROFILER_CLOCK
from xbackend.safeio import atomic_write

HOLD_KERNEL = "hold"
MANIFEST_FORMAT = 1


@dataclasses.dataclass(frozen=True)
class Entry:
    """One point as the child left it: its record, its first kernel, whether it ran."""

    record: dict[str, Any]  # PointRecord.to_dict(), not timed
    kernel: str = ""  # the function its variant launches first; "" for a vendor's
    ran: bool = False  # it launched the hold and its kernels

    @property
    def title(self) -> str:
        point = self.record
        tile = f" T={point.get('tile')}" if point.get("tile") else ""
        size = f"{point.get('M')}×{point.get('K')}·{point.get('K')}×{point.get('N')}"
        return f"{point.get('label')} {point.get('op')} {point.get('variant')}{tile} {size}"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, item: Any) -> Entry:
        if not (isinstance(item, dict) and isinstance(item.get("record"), dict)):
            raise ProfileError("a manifest entry needs its record")
        return cls(item["record"], str(item.get("kernel") or ""), item.get("ran") is True)


@dataclasses.dataclass
class Manifest:
    """What the child ran, in launch order, and on which devices."""

    run_id: str
    devices: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    variants: list[str] | None = None  # as resolved from --variants (None: every one)
    entries: list[Entry] = dataclasses.field(default_factory=list)
    problem: str = ""  # why the child ran nothing: an unknown variant, a size refused
    finished: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": MANIFEST_FORMAT,
            "run_id": self.run_id,
            "devices": self.devices,
            "variants": self.variants,
            "entries": [entry.to_dict() for entry in self.entries],
            "problem": self.problem,
            "finished": self.finished,
        }

    def write(self, path: Path) -> None:
        atomic_write(path, json.dumps(self.to_dict(), indent=1, default=str) + "\n")

    @classmethod
    def read(cls, path: Path) -> Manifest:
        try:
            item = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ProfileError(f"the profiled program wrote no manifest ({path})") from None
        except ValueError as error:
            raise ProfileError(f"{path}: not a manifest ({error})") from None
        if not isinstance(item, dict) or item.get("format") != MANIFEST_FORMAT:
            raise ProfileError(f"{path}: not a manifest of format {MANIFEST_FORMAT}")
        variants = item.get("variants")
        return cls(
            run_id=str(item.get("run_id", "")),
            devices=dict(item.get("devices") or {}),
            variants=[str(v) for v in variants] if isinstance(variants, list) else None,
            entries=[Entry.from_dict(entry) for entry in item.get("entries") or []],
            problem=str(item.get("problem") or ""),
            finished=item.get("finished") is True,
        )


def runs(rows: Sequence[KernelRow]) -> list[list[KernelRow]]:
    """ncu's rows cut into product runs: each opens with a hold, which is left out."""
    found: list[list[KernelRow]] = []
    for row in sorted(rows, key=lambda row: row.id):
        if row.function == HOLD_KERNEL:
            found.append([])
        elif not found:
            raise ProfileError(
                f"ncu profiled {row.function} (ID {row.id}) before any product's "
                f"{HOLD_KERNEL} kernel: it belongs to no point"
            )
        else:
            found[-1].append(row)
    return found


def match(rows: Sequence[KernelRow], manifest: Manifest) -> list[tuple[Entry, list[KernelRow]]]:
    """Each entry of the manifest with the kernels of its run (none where it did not run)."""
    ran = [entry for entry in manifest.entries if entry.ran]
    found = runs(rows)
    if len(found) != len(ran):
        raise ProfileError(
            f"ncu profiled {len(found)} product runs (one {HOLD_KERNEL} kernel each), "
            f"the child ran {len(ran)} products: which kernels belong to which point "
            "cannot be told"
        )
    kernels = dict(zip((id(entry) for entry in ran), found, strict=True))
    matched = []
    for entry in manifest.entries:
        mine = kernels.get(id(entry), [])
        if entry.ran and not mine:
            raise ProfileError(f"{entry.title}: ncu profiled no kernel after its hold")
        if entry.ran and entry.kernel and mine[0].function != entry.kernel:
            names = ", ".join(row.function for row in mine)
            raise ProfileError(
                f"{entry.title}: its run launched {names}, where {entry.kernel} comes first"
            )
        matched.append((entry, mine))
    return matched


def profiled(entry: Entry, kernels: Sequence[KernelRow], settings: Settings) -> PointRecord:
    """The point's record: as the child left it, with ncu's counters and kernel time
    where it ran and was checked (a wrong result keeps them too: they say what it did)."""
    point = dict(entry.record)
    if point.get("status") in ("ok", "mismatch") and kernels:
        counters = combined([row.metrics for row in kernels])
        duration = counters.get(DURATION.metric)
        if duration is None or not duration > 0:
            raise ProfileError(f"{entry.title}: ncu gave its kernels no {DURATION.metric}")
        flops = point.get("flops")
        point.update(
            kernel_s=Stats.of([duration]).to_dict(),
            kernel_samples_s=[duration],
            end_to_end_s=None,
            end_to_end_samples_s=[],
            gflops=flops / duration / 1e9 if isinstance(flops, int) else None,
            clock=PROFILER_CLOCK,
            cache=settings.cache_mode,
            launches=1,
            counters=counters,
        )
    return PointRecord.from_dict(point)


def records(
    rows: Sequence[KernelRow], manifest: Manifest, settings: Settings
) -> list[tuple[PointRecord, list[str]]]:
    """Every point of the manifest as a record, with the functions of its kernels."""
    return [
        (profiled(entry, kernels, settings), [row.function for row in kernels])
        for entry, kernels in match(rows, manifest)
    ]
