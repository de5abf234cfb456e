"""What a sweep shows while it runs: on a terminal, a bar with a predicted time left and
one line per finished point, both fitted to the terminal's width (rich); plain lines
where stdout is not a terminal (logs, CI, tests); next to nothing with ``--quiet``.

A configuration that is skipped again and again (a vendor library that is not
installed, a point over the budget at every larger size) says why once; its later
skips for the same reason are only counted.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TaskID, TextColumn
from rich.progress import Progress as RichProgress
from rich.table import Column
from rich.text import Text

from xbackend.measuring.timing import format_seconds
from xbackend.operations import DEFAULT
from xbackend.results import LineKey, PointRecord

Mode = Literal["live", "plain", "quiet"]

_NUMBER = re.compile(r"\d+(\.\d+)?(e[-+]?\d+)?")


def choose_mode(console: Console, quiet: bool = False) -> Mode:
    """Quiet if asked; a live bar on a terminal that can draw one; plain lines elsewhere."""
    if quiet:
        return "quiet"
    return "live" if console.is_terminal and not console.is_dumb_terminal else "plain"


def format_eta(seconds: float | None) -> str:
    if seconds is None:
        return "eta ?"
    whole = round(seconds)
    if whole >= 3600:
        return f"eta {whole // 3600}h{whole % 3600 // 60:02d}m"
    if whole >= 60:
        return f"eta {whole // 60}m{whole % 60:02d}s"
    return f"eta {whole}s"


class SweepDisplay:
    """The bar, the point lines and the skip memory of one sweep.

    ``log`` takes the lines in plain mode (``print`` by default); in live mode they
    go through ``console``, above the bar, each cut to the console's width.
    """

    def __init__(
        self,
        mode: Mode = "plain",
        *,
        log: Callable[[str], None] = print,
        console: Console | None = None,
    ):
        self.mode = mode
        self.log = log
        self.console = console or Console()
        self.total = 0
        self.done = 0
        self.silent_skips = 0
        self._skips: set[tuple[LineKey, str]] = set()
        self._bar: RichProgress | None = None
        self._task = TaskID(0)

    @property
    def wants_eta(self) -> bool:
        """Whether a prediction of the time left would be shown (it costs a little)."""
        return self.mode == "live"

    @contextmanager
    def sweep(self, total: int) -> Iterator[SweepDisplay]:
        """Show the sweep of ``total`` points while the block runs."""
        self.total = total
        if self.mode == "live":
            self._bar = RichProgress(
                BarColumn(bar_width=20),
                MofNCompleteColumn(),
                TextColumn("{task.fields[eta]}", table_column=Column(no_wrap=True)),
                TextColumn(
                    "{task.description}",
                    table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis"),
                ),
                console=self.console,
                transient=True,
                expand=True,
            )
            self._task = self._bar.add_task("", total=total, completed=self.done, eta="eta ?")
            self._bar.start()
        try:
            yield self
        finally:
            if self._bar is not None:
                self._bar.stop()
                self._bar = None

    def working(self, text: str, remaining_s: float | None = None) -> None:
        """A point starts: say which, and the time the rest is predicted to take."""
        if self._bar is not None:
            eta = format_eta(remaining_s)
            self._bar.update(self._task, description=text, completed=self.done, eta=eta)
            self._bar.refresh()

    def learnt(self) -> None:
        """A point an earlier run recorded: done, shown nowhere."""
        self.done += 1

    def finished(self, record: PointRecord) -> None:
        """A point is recorded: its line, unless it repeats a skip already explained."""
        self.done += 1
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done)
        if record.status == "skipped":
            key = (record.line_key, _NUMBER.sub("#", record.reason.splitlines()[0]))
            if key in self._skips:
                self.silent_skips += 1
                return
            self._skips.add(key)
        problem = record.status in ("error", "mismatch")
        if self.mode == "quiet" and not problem:
            return
        self.note(equality_line(record, self.done, self.total))

    def note(self, text: str) -> None:
        """A line of its own: plain, or cut to the terminal's width above the bar."""
        if self.mode == "live":
            self.console.print(Text(text), no_wrap=True, overflow="ellipsis", crop=True)
        else:
            self.log(text)

    def closing_note(self) -> str | None:
        """What the point lines left out, for the end of the sweep."""
        if not self.silent_skips or self.mode == "quiet":
            return None
        return (
            f"{self.silent_skips} more skipped points not listed: each repeats its "
            "configuration's first reason (the summary counts them)"
        )


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
        f"kernel {format_seconds(record.kernel_s['median'])}{_precision(record)}  "
        f"end-to-end {format_seconds(record.end_to_end_s['median'])}{_below(record)}  "
        f"{record.gflops:.3g} GFLOP/s{_flags(record)}"
    )


def _below(record: PointRecord) -> str:
    """Why an end-to-end time reads under the kernel time, where it does: the kernel time
    is then a batch's mean, taken after the product the end-to-end time is of (each
    sample's end-to-end time is at least its product's kernel time: sampler.py)."""
    kernel, end_to_end = (record.kernel_s or {}), (record.end_to_end_s or {})
    if record.launches <= 1 or not end_to_end.get("median", 0) < kernel.get("median", 0):
        return ""
    return (
        f" (under the kernel time: that is the mean of a batch of {record.launches} launches "
        "run after the product, which ran slower per launch than the product alone)"
    )


def _precision(record: PointRecord) -> str:
    """How far the kernel time can be trusted: the 95% interval of its median that
    sampling stopped on, as ± a share of the median (not the relative noise: a point of
    ±14% noise may well know its median to 1%); the samples; why they stopped."""
    stats = record.kernel_s or {}
    if "n" not in stats:
        return ""
    launches = f"×{record.launches}" if record.launches > 1 else ""
    left_out = sum(bool(mark) for mark in record.sample_marks)
    dropped = f", {left_out} left out" if left_out else ""
    samples = f"n={int(stats['n'])}{launches}, stop: {record.stop}{dropped}"
    share = record.kernel_interval_share
    if share is None:  # one sample: no interval
        return f" ({samples})"
    # Past 100%, the interval's ends lie more than twice the median apart: said, as such a
    # number (±399% on a loaded 2-core host) reads as an error otherwise.
    wide = (
        ": the interval spans more than twice the median, no time to compare" if share > 1 else ""
    )
    return f" ±{share:.1%} (95% interval of the median, {samples}{wide})"


def _flags(record: PointRecord) -> str:
    return f"  [{', '.join(record.flags)}]" if record.flags else ""
