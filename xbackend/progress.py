"""What a sweep shows while it runs: a progress bar on a terminal, and one line per point."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from xbackend.operations import DEFAULT
from xbackend.results import PointRecord
from xbackend.timing import format_seconds


class Progress:
    """A one-line progress bar on a terminal; silence elsewhere (logs have the point lines)."""

    def __init__(self, total: int, stream: TextIO = sys.stderr):
        self.total = total
        self.done = 0
        self.stream = stream
        self.live = stream.isatty()
        self.start = time.perf_counter()

    def show(self, text: str) -> None:
        if not self.live:
            return
        width = 24
        filled = int(width * self.done / max(self.total, 1))
        elapsed = time.perf_counter() - self.start
        eta = elapsed / self.done * (self.total - self.done) if self.done else 0.0
        bar = "#" * filled + "-" * (width - filled)
        line = f"[{bar}] {self.done}/{self.total}  eta {eta:4.0f} s  {text}"
        self.stream.write("\r\033[K" + line[:150])
        self.stream.flush()

    def clear(self) -> None:
        if self.live:
            self.stream.write("\r\033[K")
            self.stream.flush()


def equality_line(record: PointRecord, index: int, total: int) -> str:
    """The log line of one point, after the assignment's "code equality" printout."""
    tile = f"T={record.tile}" if record.tile else ""
    if not record.tile and record.params and "BM" in record.params:
        tile = f"{record.params['BM']}×{record.params['BN']}"  # the tuned variant's choice
    batch = f"{record.batch}×" if record.batched else ""
    plain = record.op == DEFAULT and record.dtype == "float32"
    kind = "" if plain else f"{record.op} {record.dtype} "
    head = (
        f"[{index:>{len(str(total))}}/{total}] {record.label:<10} {record.variant:<6} {tile:<5} "
        f"{kind}{batch}{record.M}×{record.K} · {record.K}×{record.N}"
    )
    if record.status in ("skipped", "error"):
        return f"{head}  {record.status}: {record.reason.splitlines()[0]}"
    assert record.kernel_s is not None and record.end_to_end_s is not None
    return (
        f"{head}  code equality: {record.equal}  "
        f"max|err| {record.max_abs_error:.2g} ({record.bound_ratio:.2g} of bound)  "
        f"kernel {format_seconds(record.kernel_s['median'])}  "
        f"end-to-end {format_seconds(record.end_to_end_s['median'])}  "
        f"{record.gflops:.3g} GFLOP/s"
    )
