"""A submission's OpenCL kernels under oclgrind, one variant a run, failing closed.

oclgrind simulates an OpenCL device and reports out-of-bounds accesses, data races and
reads of uninitialized memory, naming the kernel and the line of its file. One run a
variant: its reports are its own, whatever other kernels are called, and one kernel's
flood of reports cannot hide another's. A variant that oclgrind flagged for an access out
of bounds, or did not finish checking (a crash, its deadline, its cap on reports), is not
run natively: it could corrupt the memory of the process that runs it.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from xbackend.grading import records
from xbackend.operations import Shape

# oclgrind's report of one access: what it was, the kernel, and the line of the source.
_REPORT = re.compile(
    r"^(?P<what>(?:Invalid|Uninitialized|Possible|[\w-]+ data race)[^\n]*)\n"
    r"\tKernel: (?P<kernel>\w+)\n(?:\t[^\n]*\n)*?"
    r"\tAt line (?P<line>\d+) \(column \d+\) of input\.cl:\n\t  (?P<code>[^\n]*)",
    re.MULTILINE,
)
SHAPES = (Shape(7, 13, 5), Shape(33, 20, 17))  # every edge guard, K past a tile
TIMEOUT_S = 180  # one variant's run under oclgrind (seconds): a correct kernel's takes 2-10 s
MAX_ERRORS = 100_000  # oclgrind's cap on reports (its own default, 1000, is met by one kernel)
_CAPPED = "errors generated - suppressing further errors"
# The worst first: an access out of bounds can corrupt memory, a race gives a wrong result
# on some device, a read of memory never written gives whatever was there.
_SEVERITY = ("Invalid write", "Invalid read", "data race", "Uninitialized")


@dataclasses.dataclass(frozen=True)
class Finding:
    """A kernel's worst report (what it was, at which line of its file), and whether any
    of its reports was an access out of bounds, and which."""

    kernel: str
    what: str  # "Invalid write of size 4 (global)"
    line: int
    code: str  # the line's source, "" where oclgrind had none
    reads_out_of_bounds: bool = False
    writes_out_of_bounds: bool = False

    @property
    def out_of_bounds(self) -> str:
        """ "reads and writes", "writes", "reads" out of bounds, or ""."""
        both = [w for w, on in (("reads", self.reads_out_of_bounds),
                                ("writes", self.writes_out_of_bounds)) if on]  # fmt: skip
        return " and ".join(both)

    def said(self, file: str) -> str:
        """The report as a verdict's detail: what, where, the line's code."""
        code = f": {self.code}" if self.code else ""
        return f"{self.what}: {file} line {self.line}{code}"


def _rank(what: str) -> int:
    return next((i for i, word in enumerate(_SEVERITY) if word in what), len(_SEVERITY))


def findings(log: str) -> dict[str, Finding]:
    """Each kernel's worst report in oclgrind's output (the first of the worst kind)."""
    found: dict[str, Finding] = {}
    reads: set[str] = set()
    writes: set[str] = set()
    for match in _REPORT.finditer(log):
        what = re.sub(r" (?:at |to |from )?(global|local|private) memory address 0x[0-9a-f]+",
                      r" (\1)", match["what"])  # fmt: skip
        kernel, code = match["kernel"], match["code"].strip()
        code = "" if code == "(source not available)" else code
        if what.startswith("Invalid write"):
            writes.add(kernel)
        elif what.startswith("Invalid read"):
            reads.add(kernel)
        first = found.get(kernel)
        if first is None or _rank(what) < _rank(first.what):
            found[kernel] = Finding(kernel, what, int(match["line"]), code)
    return {
        kernel: dataclasses.replace(
            finding, reads_out_of_bounds=kernel in reads, writes_out_of_bounds=kernel in writes
        )
        for kernel, finding in found.items()
    }


@dataclasses.dataclass(frozen=True)
class Sanitized:
    """oclgrind's word on one variant: its worst report, if any, and why oclgrind did not
    finish checking it ("" where it did: then no report means no fault at those shapes)."""

    finding: Finding | None
    unfinished: str = ""

    @property
    def runs_natively(self) -> bool:
        """Safe to run natively: finished, with no access out of bounds."""
        return not self.unfinished and not (self.finding and self.finding.out_of_bounds)


def sanitize(
    folders: Sequence[str], variant: str, oclgrind: str, seed: int, dtype: str = "float32",
    timeout_s: float = TIMEOUT_S,
) -> Sanitized:  # fmt: skip
    """Run one variant of the folders under oclgrind at ``SHAPES`` (in a check of its
    own: ``check --one``), unoptimized builds (oclgrind 21.10 reads every access of them).
    Done means that check wrote its last record with no report cut off."""
    env = {**os.environ, "XBACKEND_OPENCL_OPTIONS": "-cl-opt-disable"}
    sizes = ",".join(f"{s.M}x{s.K}x{s.N}" for s in SHAPES)
    with tempfile.TemporaryDirectory(prefix="xbackend-oclgrind-") as out:
        kept = Path(out) / "records.jsonl"
        command = [oclgrind, "--data-races", "--uninitialized", "--max-errors", str(MAX_ERRORS),
                   sys.executable, "-m", "xbackend", "check", *folders, "--one", "--records",
                   str(kept), "--variants", variant, "--backends", "opencl", "--steps", "0",
                   "--shapes", sizes, "--seed", str(seed), "--dtype", dtype, "--no-times",
                   "--sanitize", "off"]  # fmt: skip
        try:
            done = subprocess.run(command, capture_output=True, text=True, env=env,
                                  timeout=timeout_s)  # fmt: skip
        except subprocess.TimeoutExpired as expired:
            log = expired.stderr or ""
            log = log.decode(errors="replace") if isinstance(log, bytes) else log
            return Sanitized(_worst(log), f"oclgrind took more than {timeout_s:g} s")
        inner = records.read(kept)
    finding = _worst(done.stderr)
    gone = _gone(inner.verdicts)
    if gone:  # a hang or a crash under oclgrind would be one natively too
        return Sanitized(finding, f"under oclgrind, {gone}")
    if _CAPPED in done.stderr:
        return Sanitized(finding, "oclgrind stopped reporting at its cap of errors")
    if not inner.done:
        said = done.stderr.strip().splitlines()[-1:] or ["nothing"]
        return Sanitized(finding, f"oclgrind ended early (exit {done.returncode}): {said[0][:200]}")
    return Sanitized(finding)


def _gone(verdicts: Sequence[records.Verdict]) -> str:
    """How the kernel's own process went under oclgrind, where it hung or died: at which
    shape, and the isolation's words ("" where it did not)."""
    for verdict in verdicts:
        if verdict.equal is None and verdict.shape is not None:
            said = verdict.detail
            if said.startswith("timed out") or said.startswith("the kernel's process"):
                shape = verdict.shape
                return f"at {shape.M}×{shape.K}·{shape.K}×{shape.N} {said.split(':')[0]}"
    return ""


def _worst(log: str) -> Finding | None:
    """The worst report in oclgrind's output, with every out-of-bounds kind of any
    kernel's on it (one variant a run: they are its kernels' reports)."""
    found = list(findings(log).values())
    if not found:
        return None
    worst = min(found, key=lambda each: _rank(each.what))
    return dataclasses.replace(
        worst,
        reads_out_of_bounds=any(each.reads_out_of_bounds for each in found),
        writes_out_of_bounds=any(each.writes_out_of_bounds for each in found),
    )
