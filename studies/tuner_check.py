"""The coarse tuner's choices against a reference tune's (an exhaustive one), raced.

    python studies/tuner_check.py --backend cuda COARSE.json EXHAUSTIVE.json

For every key the two tune caches share on this backend's device: where both chose
the same configuration, it says so; where they differ, both configurations race at the
coarse entry's shape (``tuning.race``: turns, round-robin, bootstrap intervals), and the
coarse choice's speed over the reference's is printed with the race's verdict. The
reference may be a cache of any format (only its ``params`` are read).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import xbackend
from xbackend import tuning
from xbackend.launches import warp
from xbackend.problems import Shape, make_operands
from xbackend.sweep.sizes import parse_shapes


def _sampler(backend: Any, shape: Shape, variant: str, op: str) -> tuning.Sampler:
    """Kernel seconds of a configuration at ``shape``, sampled as the tuner samples."""
    A, B = make_operands(shape, seed=3)

    def sampler(config: warp.WarpConfig, count: int) -> list[float]:
        measured = backend.measure(
            A, B, variant, op=op, params=config.to_dict(), sampling=tuning.SAMPLING,
            warmup=1, samples=count, min_samples=count,
        )  # fmt: skip
        return list(measured.kept[0])

    return sampler


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("coarse", type=Path)
    parser.add_argument("reference", type=Path)
    parser.add_argument("--backend", default="cuda", help="NAME or NAME:DEVICE")
    parser.add_argument("--race-time", type=float, default=3.0, help="seconds per race, at most")
    args = parser.parse_args()
    backend = xbackend.get_backend(*args.backend.split(":", 1))
    coarse = json.loads(args.coarse.read_text())["entries"]
    reference = json.loads(args.reference.read_text())["entries"]
    prefix = f"{backend.name}|{backend.device.name}|"
    ratios = []
    for key in sorted(k for k in coarse if k.startswith(prefix) and k in reference):
        mine, theirs = coarse[key], reference[key]
        variant, op = key.split("|")[2:4]
        if mine["params"] == theirs["params"]:
            print(f"{key}: the same choice")
            ratios.append(1.0)
            continue
        (M, K), (_, N) = (side.split("×") for side in mine["shape"].split(" · "))
        shape = parse_shapes(f"{M}x{K}x{N}")[0]
        racers = [tuning.Finalist(warp.WarpConfig.from_dict(e["params"])) for e in (mine, theirs)]
        tuning.race(racers, _sampler(backend, shape, variant, op), args.race_time)
        ratio = racers[1].median_s / racers[0].median_s
        ratios.append(ratio)
        told = racers[0].below(racers[1]) or racers[1].below(racers[0])
        print(
            f"{key}: coarse {racers[0].config.label} at {ratio:.1%} of the reference's speed "
            f"({racers[1].config.label}); {'told apart' if told else 'not told apart'} in "
            f"{len(racers[0].samples_s)} samples each"
        )
    backend.close()
    if ratios:
        print(f"{len(ratios)} keys; the coarse choice's speed over the reference's: "
              f"lowest {min(ratios):.1%}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
