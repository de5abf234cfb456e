"""One device clock for CUDA and OpenCL (docs/notebook/measurement.md): what each clock says of
the same kernels, what the launches cost, and what stamping costs.

For each backend, variant and size, measured side by side in one process, round after
round (so that drift enters every line alike):
- the stamped build (``XBACKEND_CLOCK`` unset): the kernels' span on the GPU's
  %globaltimer, the API's time of the same launches, their difference (the launch
  overhead), the gap between launches of a batch;
- the build without stamps (``XBACKEND_CLOCK=api``): the API's time alone, as every
  point was timed before the stamps; against the stamped build's API time, what
  stamping costs.

    python studies/clock_study.py --backends cuda,opencl:nvidia --out DIR

``--ncu`` instead runs each CUDA product a few times, printing every launch's span,
for ``ncu --clock-control none --metrics gpu__time_duration.sum`` to time the same
launches (studies/gpu_clock.sh pairs them).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

import xbackend
from xbackend.measuring.timing import Sampling

SIZES = {  # (M, K, N): the assignment's first and later sizes, and two large squares
    "16x14": (16, 14, 16),
    "128x112": (128, 112, 128),
    "608x532": (608, 532, 608),
    "1024": (1024, 1024, 1024),
    "2048": (2048, 2048, 2048),
    "4096": (4096, 4096, 4096),
}
VARIANTS = ("naive", "tiled", "vec4", "warp_db")


def _operands(size: tuple[int, int, int], seed: int) -> tuple[np.ndarray, np.ndarray]:
    M, K, N = size
    rng = np.random.default_rng(seed)
    return rng.standard_normal((M, K), np.float32), rng.standard_normal((K, N), np.float32)


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _one(backend: xbackend.Backend, variant: str, A: np.ndarray, B: np.ndarray, api: bool):
    """One measurement, stamped or by the API's clock alone."""
    if api:
        os.environ["XBACKEND_CLOCK"] = "api"
    else:
        os.environ.pop("XBACKEND_CLOCK", None)
    sampling = Sampling(min_samples=10, max_samples=60, max_noise=0.01, timeout_s=3.0)
    m = backend.measure(A, B, variant, sampling=sampling)
    kernel, _ = m.kept
    return {
        "clock": m.clock,
        "kernel_s": _median(kernel),
        "api_s": _median(m.api_s),
        "gap_s": _median(m.gap_s),
        "launches": m.launches,
        "samples": len(kernel),
    }


def study(
    names: list[str], variants: list[str], sizes: list[str], rounds: int
) -> list[dict[str, Any]]:
    rows = []
    for name in names:
        backend = xbackend.get_backend(*name.split(":", 1))
        print(f"# {name}: {backend.device.name}", flush=True)
        for size_name in sizes:
            A, B = _operands(SIZES[size_name], seed=7)
            for variant in variants:
                runs: dict[str, list[dict[str, Any]]] = {"stamped": [], "api": []}
                try:
                    for _ in range(rounds):
                        runs["stamped"].append(_one(backend, variant, A, B, api=False))
                        runs["api"].append(_one(backend, variant, A, B, api=True))
                except xbackend.XBackendError as error:
                    print(f"{name} {variant} {size_name}: {error}", flush=True)
                    continue
                row = _row(name, variant, size_name, runs)
                rows.append(row)
                print(json.dumps(row), flush=True)
        backend.close()
    return rows


def _row(
    name: str, variant: str, size: str, runs: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    """The medians over rounds of each round's median."""

    def over(kind: str, field: str) -> float | None:
        values = [run[field] for run in runs[kind] if run[field] is not None]
        return _median(values)

    span, api_stamped = over("stamped", "kernel_s"), over("stamped", "api_s")
    api_plain = over("api", "kernel_s")
    return {
        "backend": name,
        "variant": variant,
        "size": size,
        "clock": runs["stamped"][0]["clock"],
        "span_us": span and span * 1e6,
        "api_stamped_us": api_stamped and api_stamped * 1e6,
        "overhead_us": span and api_stamped and (api_stamped - span) * 1e6,
        "gap_us": (gap := over("stamped", "gap_s")) and gap * 1e6,
        "api_unstamped_us": api_plain and api_plain * 1e6,
        "stamp_cost": api_stamped and api_plain and api_stamped / api_plain - 1,
        "launches": runs["stamped"][0]["launches"],
        "rounds": len(runs["stamped"]),
    }


def ncu_runs(variants: list[str], sizes: list[str], runs: int) -> None:
    """Each CUDA product run ``runs`` times after one untimed run; every span printed."""
    backend: Any = xbackend.get_backend("cuda")  # a CompiledBackend: _plan, run_product
    for size_name in sizes:
        A, B = _operands(SIZES[size_name], seed=7)
        for variant in variants:
            tile = backend.resolve_tile(variant, None, "mm", A.itemsize)
            product = backend._plan("mm", variant, tile, A, B)  # the product measure runs
            timed = backend.run_product(product, runs)
            names = [launch.kernel for launch in product.launches]
            print(json.dumps({"variant": variant, "size": size_name, "kernels": names,
                              "clock": timed.clock, "spans_us": [s * 1e6 for s in timed.seconds]}),
                  flush=True)  # fmt: skip


def opencl_ptx(out: Path, variants: list[str]) -> None:
    """NVIDIA's OpenCL programs as PTX, each variant's built with and without STAMP, for
    comparing what the two compilers make of the same kernel (docs/notebook/measurement.md)."""
    from xbackend.launches.kernels import STAMP

    backend: Any = xbackend.get_backend("opencl", "nvidia")  # _plan, _build
    A, B = _operands(SIZES["608x532"], seed=7)
    out.mkdir(parents=True, exist_ok=True)
    for variant in variants:
        tile = backend.resolve_tile(variant, None, "mm", A.itemsize)
        launch = backend._plan("mm", variant, tile, A, B).launches[0]
        for suffix, options in (("", launch.options), ("_stamp", (*launch.options, STAMP))):
            program = backend._build(launch.family, list(options), np.dtype(np.float32))
            (out / f"opencl_{variant}{suffix}.ptx").write_bytes(program.binaries[0])
            print(f"{variant}{suffix}: {' '.join(options)}", flush=True)


def pair_ncu(csv_path: Path, spans_path: Path) -> None:
    """Nsight Compute's gpu__time_duration beside the span of the same launch: ncu's
    rows in launch order (each product's untimed first run, then its timed ones) against
    the spans ``--ncu`` printed; a product of several kernels is the sum of its rows."""
    import csv

    lines = csv_path.read_text().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    durations = [float(row["Metric Value"].replace(",", "")) * 1e-3
                 for row in csv.DictReader(lines[header:])]  # fmt: skip
    at = 0
    for line in spans_path.read_text().splitlines():
        if not line.startswith("{"):
            continue
        product = json.loads(line)
        kernels, spans_us = len(product["kernels"]), product["spans_us"]
        rows = durations[at : at + kernels * (len(spans_us) + 1)]
        at += len(rows)
        per_run = [sum(rows[i : i + kernels]) for i in range(0, len(rows), kernels)][1:]
        ratios = [span / ncu for span, ncu in zip(spans_us, per_run, strict=True)]
        span, ncu = statistics.median(spans_us), statistics.median(per_run)
        print(
            f"{product['variant']:8} {product['size']:6} span {span:9.1f} us  ncu {ncu:9.1f} us"
            f"  span/ncu {min(ratios):.4f}-{max(ratios):.4f}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="cuda,opencl:nvidia")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--sizes", default="16x14,128x112,608x532,2048,4096")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ncu", action="store_true", help="run for Nsight Compute instead")
    parser.add_argument("--ptx", type=Path, help="write NVIDIA OpenCL's PTX here instead")
    parser.add_argument(
        "--pair",
        nargs=2,
        type=Path,
        metavar=("NCU_CSV", "SPANS"),
        help="pair ncu's durations with --ncu's spans, launch for launch",
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    variants, sizes = args.variants.split(","), args.sizes.split(",")
    if args.pair:
        pair_ncu(*args.pair)
        return 0
    if args.ptx:
        opencl_ptx(args.ptx, variants)
        return 0
    if args.ncu:
        ncu_runs(variants, sizes, runs=5)
        return 0
    rows = study(args.backends.split(","), variants, sizes, args.rounds)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "clock_study.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
