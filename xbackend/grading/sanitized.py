"""oclgrind's verdicts kept in a file, keyed by exactly what it simulates.

oclgrind runs every work-item of a kernel in a simulator: a minute of CPU for a tiled
kernel at a check's two edge shapes, again at every check of the same kernel. What it
reports is a function of what it runs: the kernel's code and every file it includes, the
build options, each launch (its kernel, groups, grid and arguments) and the operands'
bytes at the shapes it runs, and oclgrind itself (its version, its options and its
``OCLGRIND_*`` settings). Those are the key (``key``); a run whose key is in the file
takes the recorded verdict instead of simulating, and a new key simulates and is
recorded. A kernel edited by one character, a header it includes, a changed manifest or
planner that moves a launch, another oclgrind: another key, never the old verdict.

``XBACKEND_SANITIZER_VERDICTS`` names the file; unset (or ``none``) there is none, and
every run simulates. Only runs that finished are recorded: a deadline met or a crash is
the machine's, and is simulated again. The file is JSON lines, appended to (under a
lock, by each process that simulated something new), the last entry of a key winning;
``what`` in each says which kernel it was, for a reader.
"""

from __future__ import annotations

import dataclasses
import fcntl
import functools
import hashlib
import json
import os
import signal
import subprocess
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from xbackend import families
from xbackend.errors import XBackendError
from xbackend.families.sources import check_includes
from xbackend.launches.element import plan_element
from xbackend.launches.kernels import STAMP, include_folders, read_kernel
from xbackend.launches.launch import KernelLaunch, Product
from xbackend.launches.operands import check_operands
from xbackend.operations import Shape, make_operands
from xbackend.safeio import read_small_text

ENV = "XBACKEND_SANITIZER_VERDICTS"
OFF = "none"  # the variable's value that ignores any file
FORMAT = 1  # the key's own version: raised where the run it stands for changes otherwise
_MAX_BYTES = 64 << 20  # a file past this is not read (a verdict is a few hundred bytes)
_VERSION_TIMEOUT_S = 5.0


def verdicts_path() -> Path | None:
    """The file of verdicts ``XBACKEND_SANITIZER_VERDICTS`` names; None: unset or none."""
    named = os.environ.get(ENV, "").strip()
    return None if named.lower() in ("", OFF) else Path(named)


@functools.cache
def simulator_version(tool: str) -> str:
    """What ``tool --version`` says (``Oclgrind 21.10``), or "" where it says nothing
    within seconds: then nothing is keyed, and every run simulates. The tool runs in a
    session of its own, ended whole at the deadline (a stand-in that leaves a process
    behind holding its output cannot block this)."""
    try:
        process = subprocess.Popen([tool, "--version"], stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                   text=True, start_new_session=True)  # fmt: skip
    except OSError:
        return ""
    try:
        said, _ = process.communicate(timeout=_VERSION_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return ""
    finally:
        if process.stdout is not None:
            process.stdout.close()
    lines = [line.strip() for line in said.splitlines() if line.strip()]
    return lines[0] if process.returncode == 0 and lines else ""


def code_digest(family: str, language: str = "opencl", stamped: bool = False) -> str:
    """A digest of a family's kernel file as it is built (every character: a comment
    moves a report's line; ``stamped``: with the clock's hooks) and of each file it
    includes, by content."""
    path, text = read_kernel(family, language, stamped)
    included: set[Path] = set()
    check_includes(path, text, include_folders(family, language), seen=included)
    contents = sorted(_sha(Path(found).read_bytes()) for found in included)
    return _sha("\x00".join([text, *contents]).encode())


def product_said(product: Product, language: str = "opencl") -> dict[str, Any]:
    """A product as the simulator runs it, in plain data: each step (a launch's kernel,
    build options, grid, group and arguments) with its code's digest, the operands'
    layout and bytes, the output and the workspaces."""
    steps = []
    for step in product.steps:
        said = {"step": type(step).__name__, **_plain(step)}
        if isinstance(step, KernelLaunch):
            said["code"] = code_digest(step.family, language, STAMP in step.options)
        steps.append(said)
    inputs = {name: [list(a.shape), list(a.strides), str(a.dtype), _sha(a.tobytes())]
              for name, a in sorted(product.inputs.items())}  # fmt: skip
    return {"steps": steps, "inputs": inputs, "output": list(product.output_shape),
            "dtype": str(product.dtype), "workspaces": dict(sorted(product.workspaces.items())),
            "turned": product.output_turned}  # fmt: skip


def planned_variant(
    variant: str, shapes: Sequence[Shape], seed: int, dtype: str, op: str = "mm"
) -> list[dict[str, Any]] | None:
    """The products a check of ``variant`` runs at ``shapes`` (its default tile, operands
    of ``seed``), as ``product_said`` says them; None where they cannot be told here
    without the simulated device: a geometry other than the manifest's own launches, a
    variant whose tuned parameters its device would pick, a shape it refuses."""
    spec = families.find_variant(variant)
    if spec is None or spec.geometry != "element" or spec.configurable:
        return None
    if spec.takes_tile and spec.default_tile is None:
        return None
    wide = os.environ.get("XBACKEND_INDEX", "").strip() == "wide"
    said = []
    for shape in shapes:
        try:
            A, B = check_operands(*make_operands(shape, seed, np.dtype(dtype)), op)
            product = plan_element(op, spec, A, B, spec.default_tile, None, wide)
            said.append({"shape": [shape.M, shape.K, shape.N], "product": product_said(product)})
        except (XBackendError, ValueError, OSError):
            return None
    return said


def key(parts: Mapping[str, Any]) -> str:
    """The key of a simulated run: a digest of every part of it (``FORMAT`` included)."""
    text = json.dumps({"format": FORMAT, **parts}, sort_keys=True, default=str)
    return _sha(text.encode())


def simulator_parts(tool: str, options: Sequence[str], env: Mapping[str, str]) -> dict[str, Any]:
    """The simulator's part of a key: its version, its options, the environment the run
    is given and this one's ``OCLGRIND_*`` settings (which it reads too); {} where its
    version cannot be had (nothing is then keyed)."""
    version = simulator_version(tool)
    if not version:
        return {}
    settings = {name: value for name, value in os.environ.items() if name.startswith("OCLGRIND")}
    return {"simulator": version, "options": list(options), "env": dict(env), **settings}


def recorded(found: str) -> dict[str, Any] | None:
    """The verdict the file keeps for the key ``found`` (its last entry), or None: no
    file, no such key, or a file that cannot be read (said once, as a warning)."""
    path = verdicts_path()
    if path is None:
        return None
    try:
        text = read_small_text(path, _MAX_BYTES)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:  # UnsafePath: a folder, a FIFO, too large; not UTF-8
        _warn(path, f"not read ({error})")
        return None
    verdict = None
    for line in text.splitlines():
        entry = _entry(line)
        if entry is not None and entry.get("key") == found:
            verdict = entry.get("verdict")
    return verdict if isinstance(verdict, dict) else None


def record(found: str, what: str, verdict: Mapping[str, Any]) -> None:
    """Append the verdict of the key ``found`` to the file (under its lock, in one write;
    a link at its name is refused); one that cannot be written is said as a warning."""
    path = verdicts_path()
    if path is None:
        return
    line = json.dumps({"key": found, "what": what, "verdict": verdict}, ensure_ascii=False) + "\n"
    try:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
        descriptor = os.open(path, flags, 0o644)
        with os.fdopen(descriptor, "a", encoding="utf-8") as stream:
            fcntl.flock(stream, fcntl.LOCK_EX)  # released when it closes
            stream.write(line)
    except OSError as error:
        _warn(path, f"not written ({error})")


def _entry(line: str) -> dict[str, Any] | None:
    try:
        found = json.loads(line)
    except ValueError:
        return None  # a line cut short, or edited by hand: a miss, never an error
    return found if isinstance(found, dict) else None


@functools.cache
def _warn(path: Path, said: str) -> None:
    warnings.warn(f"{ENV}={path}: {said}", stacklevel=3)


def _plain(value: Any) -> Any:
    """A launch's parts as JSON takes them: a number with its width (np.int32 and
    np.int64 build other launches), a buffer by name, a struct by its fields."""
    if isinstance(value, np.generic):
        return [value.dtype.name, value.item()]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
