"""One profile, start to end: the spec written, the child run under ncu, ncu's report
read back as CSV, its kernels matched to the points, the points recorded as results.

Everything lands in the output folder: ``results.jsonl`` and ``results.csv`` (the
records, as every command writes them; the run header keeps ncu's version, path and
settings under ``environment.profiler``), ``profile.ncu-rep`` (ncu's report, for its
viewer), ``ncu.csv`` (the report as CSV), ``ncu.log`` (what ncu and the child printed),
and the child's ``profile-spec.json`` and ``profile-manifest.json``.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from xbackend import families
from xbackend.profiling import ncu as ncu_tool
from xbackend.profiling.child import Spec
from xbackend.profiling.launches import Manifest, records
from xbackend.profiling.ncu import KernelRow, ProfileError, Settings
from xbackend.results import PointRecord, ResultsWriter, RunHeader, now_iso
from xbackend.results.plan import Plan
from xbackend.safeio import atomic_write
from xbackend.sweep.environment import environment

SPEC_NAME = "profile-spec.json"
MANIFEST_NAME = "profile-manifest.json"
REPORT_NAME = "profile.ncu-rep"
NCU_CSV_NAME = "ncu.csv"
LOG_NAME = "ncu.log"
CHILD = "xbackend.profiling.child"
# ncu's words when the driver keeps the GPU's counters from users who are not root.
_NO_PERMISSION = "ERR_NVGPUCTRPERM"
PERMISSION_MESSAGE = (
    "ncu: the driver lets administrators alone read the GPU's counters "
    f"({_NO_PERMISSION}): run as root, or load the driver with "
    "NVreg_RestrictProfilingToAdminUsers=0"
)


@dataclasses.dataclass(frozen=True)
class Request:
    """What to profile: the backends (``NAME[:DEVICE]``), the plan, ``--variants``'s words."""

    targets: list[str]
    plan: Plan
    variant_words: list[str]


@dataclasses.dataclass(frozen=True)
class Profiled:
    """A profile's points, each with the functions of the kernels counted for it."""

    records: list[PointRecord]
    kernels: list[list[str]]
    header: RunHeader


@dataclasses.dataclass(frozen=True)
class Profiler:
    """The ncu to run, its version, and how it profiles."""

    path: str
    version: str
    settings: Settings = dataclasses.field(default_factory=Settings)


def profile(
    request: Request, out: Path, profiler: Profiler, say: Callable[[str], None] = print
) -> Profiled:
    """Profile every point of ``request`` into the folder ``out`` (made, locked and empty:
    the caller's); ``say`` gets a line per point as the child finishes it."""
    run_id = uuid.uuid4().hex[:12]
    folders = [str(folder) for folder in families.added_folders()]  # --kernels, for the child
    spec = Spec(
        run_id, request.targets, request.plan, request.variant_words, out / MANIFEST_NAME, folders
    )
    atomic_write(out / SPEC_NAME, json.dumps(spec.to_dict(), indent=1) + "\n")
    (out / MANIFEST_NAME).unlink(missing_ok=True)  # a failed attempt's must not be read
    program = [sys.executable, "-m", CHILD, str(out / SPEC_NAME)]
    command = ncu_tool.profile_command(profiler.path, profiler.settings, out / REPORT_NAME, program)
    returncode, log = _run_logged(command, out / LOG_NAME, say)
    manifest = _manifest(out / MANIFEST_NAME, returncode, log)
    rows = _rows(profiler, out) if any(entry.ran for entry in manifest.entries) else []
    matched = records(rows, manifest, profiler.settings)
    header = RunHeader(
        run_id=run_id,
        timestamp=now_iso(),
        environment={
            **environment(),
            "profiler": ncu_tool.described(
                profiler.path, profiler.version, profiler.settings, command
            ),
        },
        plan=dataclasses.replace(request.plan, variants=manifest.variants),
        devices=manifest.devices,
    )
    with ResultsWriter(out, header) as writer:
        for record, _ in matched:
            writer.append(record)
    return Profiled([r for r, _ in matched], [kernels for _, kernels in matched], header)


def _run_logged(
    command: Sequence[str], log_path: Path, say: Callable[[str], None]
) -> tuple[int, list[str]]:
    """Run ncu, its output (and the child's) into ``log_path``; the child's line per point
    said as it comes. The exit status and every line."""
    lines: list[str] = []
    with (
        log_path.open("w", encoding="utf-8") as log,
        subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
        ) as process,
    ):
        assert process.stdout is not None
        for line in process.stdout:
            log.write(line)
            lines.append(line.rstrip("\n"))
            if line.startswith("profiled "):  # ncu's errors end up in the error raised
                say(line.rstrip("\n"))
    return process.returncode, lines


def _manifest(path: Path, returncode: int, log: list[str]) -> Manifest:
    """The child's manifest, or why the profile failed (from ncu's log where it says)."""
    if any(_NO_PERMISSION in line for line in log):
        raise ProfileError(PERMISSION_MESSAGE)
    tail = "\n".join(log[-12:])
    try:
        manifest = Manifest.read(path)
    except ProfileError as error:
        raise ProfileError(f"{error}; ncu exited with {returncode}:\n{tail}") from None
    if manifest.problem:
        raise ProfileError(manifest.problem)
    if returncode != 0 or not manifest.finished:
        done = sum(entry.ran for entry in manifest.entries)
        raise ProfileError(
            f"ncu or the profiled program stopped (exit status {returncode}) after "
            f"{done} products:\n{tail}"
        )
    return manifest


def _rows(profiler: Profiler, out: Path) -> list[KernelRow]:
    """ncu's report as rows, its CSV kept as ``ncu.csv``."""
    done = subprocess.run(
        ncu_tool.import_command(profiler.path, out / REPORT_NAME),
        capture_output=True,
        text=True,
        errors="replace",
        timeout=600,
    )
    if done.returncode != 0:
        raise ProfileError(f"ncu could not read its report: {(done.stderr or done.stdout)[-600:]}")
    atomic_write(out / NCU_CSV_NAME, done.stdout)
    return ncu_tool.parse_csv(done.stdout)
