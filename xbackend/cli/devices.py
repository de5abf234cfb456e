"""``xbackend devices``: every backend, available or why not, and a tiny product on each."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from xbackend import Backend, DeviceInfo, backends, get_backend
from xbackend.problems import Reference, Shape, check, make_operands


def add_parser(commands: Any) -> None:
    devices = commands.add_parser(
        "devices",
        help="list every backend and device, and run a tiny product on each",
        description="List every backend: available or why not, its devices, and PASS/FAIL "
        "of a tiny matrix product for every variant on every device.",
    )
    devices.add_argument("--no-run", action="store_true", help="list only, run nothing")
    devices.set_defaults(func=run)


def _smoke_test(backend: Backend) -> list[tuple[str, bool | None, str]]:
    """A tiny, awkwardly shaped product on every variant: (variant, passed, detail);
    passed is None for a variant that cannot run here (detail: why)."""
    shape = Shape(7, 5, 3)
    A, B = make_operands(shape, seed=1)
    reference = Reference.of(A, B)
    outcomes: list[tuple[str, bool | None, str]] = []
    for variant in backend.variants():
        problem = backend.variant_problem(variant, np.dtype(np.float32), "mm")
        if problem:  # compare lists it as skipped: so does this
            outcomes.append((variant, None, f"cannot run here: {problem.splitlines()[0]}"))
            continue
        try:
            verdict = check(backend.matmul(A, B, variant=variant), reference)
        except Exception as error:
            outcomes.append((variant, False, f"{type(error).__name__}: {error}".splitlines()[0]))
        else:
            detail = f"max|err| {verdict.max_abs_error:.2g}" if verdict.equal else "wrong result"
            outcomes.append((variant, verdict.equal, detail))
    return outcomes


def local_memory(device: DeviceInfo) -> str:
    """What a group may declare of shared/local memory, and where the API lets it ask for
    more at launch (CUDA's opt-in dynamic shared memory), that too."""
    declared = _size(device.local_mem_bytes)
    more = device.local_mem_opt_in_bytes or 0
    if more > (device.local_mem_bytes or 0):
        return f"{declared}, {_size(more)} asked for at launch"
    return declared


def _size(nbytes: int | None) -> str:
    if not nbytes:
        return "?"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes} B"


def _run_on(name: str, index: int) -> int:
    """The smoke test on one device: the number of failures."""
    try:
        backend = get_backend(name, index)
    except Exception as error:
        print(f"      FAIL  could not open: {type(error).__name__}: {error}")
        return 1
    failures = 0
    with backend:
        outcomes = _smoke_test(backend)
        width = max((len(variant) for variant, _, _ in outcomes), default=0)
        for variant, passed, detail in outcomes:
            failures += passed is False
            verdict = {True: "PASS", False: "FAIL", None: "SKIP"}[passed]
            print(f"      {verdict}  {variant:<{width}}  7×5 · 5×3  {detail}")
    return failures


def run(args: argparse.Namespace) -> int:
    failures = 0
    for info in backends():
        if not info.available:
            print(f"{info.name}: unavailable: {info.reason}")
            continue
        print(f"{info.name}: available, {len(info.devices)} device(s)")
        for index, device in enumerate(info.devices):
            print(
                f"  [{index}] {device.name} ({device.platform}; {device.kind}; "
                f"driver {device.driver_version or '?'}; memory {_size(device.global_mem_bytes)}; "
                f"{device.compute_units or '?'} compute units; "
                f"local/shared {local_memory(device)}; cache {_size(device.cache_bytes)})"
            )
            if not args.no_run:
                failures += _run_on(info.name, index)
    return 1 if failures else 0
