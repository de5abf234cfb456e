"""Another job whose load varies by itself: for SECONDS (at most 1800), it keeps 0, then 1,
then 2 cores busy, PHASE seconds each (default 7), round and round (issue 53's A/A pairs:
studies/cpu_aa.sh). Its busy cores are processes spinning; it ends them as it ends."""

from __future__ import annotations

import multiprocessing
import sys
import time


def _spin(until: float) -> None:
    while time.time() < until:
        pass


def main(seconds: float, phase_s: float = 7.0) -> None:
    end = time.time() + min(seconds, 1800.0)
    busy = 0
    while time.time() < end:
        until = min(end, time.time() + phase_s)
        spinners = [multiprocessing.Process(target=_spin, args=(until,)) for _ in range(busy)]
        for spinner in spinners:
            spinner.start()
        time.sleep(max(0.0, until - time.time()))
        for spinner in spinners:
            spinner.join()
        busy = (busy + 1) % 3


if __name__ == "__main__":
    main(float(sys.argv[1]), *(float(a) for a in sys.argv[2:3]))
