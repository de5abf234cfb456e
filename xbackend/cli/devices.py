"""``xbackend devices``: every backend, available or why not, and a tiny product on each."""

from __future__ import annotations

import argparse
from typing import Any

from xbackend import Backend, backends, get_backend
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


def _smoke_test(backend: Backend) -> list[tuple[str, bool, str]]:
    """A tiny, awkwardly shaped product on every variant: (variant, passed, detail)."""
    shape = Shape(7, 5, 3)
    A, B = make_operands(shape, seed=1)
    reference = Reference.of(A, B)
    outcomes = []
    for variant in backend.runnable_variants():
        try:
            verdict = check(backend.matmul(A, B, variant=variant), reference)
        except Exception as error:
            outcomes.append((variant, False, f"{type(error).__name__}: {error}".splitlines()[0]))
        else:
            detail = f"max|err| {verdict.max_abs_error:.2g}" if verdict.equal else "wrong result"
            outcomes.append((variant, verdict.equal, detail))
    return outcomes


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
        for variant, passed, detail in _smoke_test(backend):
            failures += not passed
            print(f"      {'PASS' if passed else 'FAIL'}  {variant:<6} 7×5 · 5×3  {detail}")
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
                f"local/shared {_size(device.local_mem_bytes)}; cache {_size(device.cache_bytes)})"
            )
            if not args.no_run:
                failures += _run_on(info.name, index)
    return 1 if failures else 0
