"""Two tune caches, entry by entry: a serial tune's and a tune shared among several GPUs
(docs/notebook/cluster.md). For each entry: the two choices and, where they differ, whether their
race intervals (each cache's 95% interval of its choice's median kernel time) overlap.

    python scripts/tune_agreement.py SERIAL.json SHARED.json
"""

from __future__ import annotations

import json
import sys
from typing import Any


def _label(params: dict[str, Any]) -> str:
    return " ".join(f"{name}={value}" for name, value in sorted(params.items()))


def _interval(entry: dict[str, Any]) -> str:
    bounds = entry.get("interval_s")
    if not bounds:
        return "—"
    return f"{bounds[0] * 1e6:.1f}–{bounds[1] * 1e6:.1f} µs"


def main(serial_path: str, shared_path: str) -> int:
    with open(serial_path) as file:
        serial = json.load(file)["entries"]
    with open(shared_path) as file:
        shared = json.load(file)["entries"]
    print("| entry | serial's choice (95%) | shared's choice (95%) | same |")
    print("| --- | --- | --- | --- |")
    same = 0
    for key in sorted(set(serial) | set(shared)):
        a, b = serial.get(key), shared.get(key)
        if a is None or b is None:
            print(f"| {key} | {'—' if a is None else _label(a['params'])} | "
                  f"{'—' if b is None else _label(b['params'])} | only one |")  # fmt: skip
            continue
        agree = a["params"] == b["params"]
        same += agree
        verdict = "yes"
        if not agree:
            (a_low, a_high), (b_low, b_high) = a["interval_s"], b["interval_s"]
            overlap = a_low <= b_high and b_low <= a_high
            verdict = "no, their intervals overlap" if overlap else "no"
        print(f"| {key} | {_label(a['params'])} ({_interval(a)}) | "
              f"{_label(b['params'])} ({_interval(b)}) | {verdict} |")  # fmt: skip
    print(f"\n{same} of {len(set(serial) & set(shared))} entries chose the same configuration")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    raise SystemExit(main(sys.argv[1], sys.argv[2]))
