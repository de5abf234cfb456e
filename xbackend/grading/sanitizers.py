"""A submission's kernels under the sanitizers, one variant a run, failing closed.

oclgrind simulates an OpenCL device and reports out-of-bounds accesses, data races and
reads of uninitialized memory; compute-sanitizer runs CUDA kernels on the GPU under its
memcheck (out-of-bounds accesses) and racecheck (shared-memory races) tools. Each names
the kernel and the line of its file. One run a variant: its reports are its own,
whatever other kernels are called, and one kernel's flood of reports cannot hide
another's. A variant flagged for an access out of bounds, or whose run did not finish (a
crash, its deadline, a cap on reports), is not run natively: it could corrupt the memory
of the process that runs it. A variant oclgrind cannot run (a function it does not
simulate, such as sub-groups', a build it rejects, a shape too large to simulate) is
``not sanitized``, with why: it runs natively, and its verdict says it was not checked.

oclgrind's deadline is on the CPU time its run spends, not on the clock, and scales with
the work at the shapes it runs (``cpu_deadline_s``): a loaded machine gives its run more
wall time, not another verdict.
"""

from __future__ import annotations

import dataclasses
import math
import re
import resource
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from signal import SIGKILL, SIGXCPU
from typing import Any

from xbackend import families
from xbackend.backends.cubins import LINEINFO_ENV
from xbackend.backends.execution import RED_ZONE_ENV
from xbackend.grading import records, sanitized
from xbackend.grading.deadlines import run_to_deadline
from xbackend.grading.shapes import taken_shapes
from xbackend.operations import Shape
from xbackend.sweep.isolation import TIMEOUT_ENV, child_environment

# oclgrind's report of one access: what it was, the kernel, and the line of the source.
_REPORT = re.compile(
    r"^(?P<what>(?:Invalid|Uninitialized|Possible|[\w-]+ data race)[^\n]*)\n"
    r"\tKernel: (?P<kernel>\w+)\n(?:\t[^\n]*\n)*?"
    r"\tAt line (?P<line>\d+) \(column \d+\) of input\.cl:\n\t  (?P<code>[^\n]*)",
    re.MULTILINE,
)
SHAPES = (Shape(7, 13, 5), Shape(33, 20, 17))  # every edge guard, K past a tile
TIMEOUT_S = 180  # one variant's run under compute-sanitizer (seconds, on the clock)
# oclgrind's deadline, in CPU seconds of its run: a start (the interpreter, the imports,
# the builds: 1-3 s of CPU measured), and each multiply-add of the shapes it runs. On the
# 2-core machine (2026-11-28) oclgrind simulated a multiply-add in 7.5 µs (the example's
# naive kernel) to 9.5 µs (its tiled one) of CPU at 64³ and 128³; the deadline gives each
# 40 µs, four times that.
BASE_CPU_S = 60.0
CPU_S_PER_MULTIPLY_ADD = 40e-6
MAX_CPU_S = 600.0  # a run that would need more is not made: "not sanitized"
# The clock's deadline beside it, for a run blocked without spending CPU: ten times its
# CPU deadline (a machine ten times oversubscribed still finishes it on CPU time).
WALL_PER_CPU = 10.0
MAX_ERRORS = 100_000  # oclgrind's cap on reports (its own default, 1000, is met by one kernel)
_OCLGRIND_OPTIONS = ("--data-races", "--uninitialized", "--max-errors", str(MAX_ERRORS))
# Unoptimized builds (oclgrind 21.10 reads every access of them), C without a red zone.
_OCLGRIND_ENV = {"XBACKEND_OPENCL_OPTIONS": "-cl-opt-disable", RED_ZONE_ENV: "0"}
_CAPPED = "errors generated - suppressing further errors"
# A build's error, as ``KernelCompileError`` says it, and as a check's verdict says it to a
# student (grading/failures.py: "does not compile: FILE:LINE: message").
_BUILD_FAILED = ("failed to compile", "does not compile")
_RULE_REFUSED = ": its family's rule "  # a shape its rules refuse, as ``plan_element`` says it
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
        where = f"{file} line {self.line}" if self.line else file
        return f"{self.what}: {where}{code}"


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
    """oclgrind's word on one variant: its worst report, if any, why oclgrind did not
    finish checking it ("" where it did: then no report means no fault at those shapes),
    and why it did not check it at all (``skipped``: it runs natively, not sanitized)."""

    finding: Finding | None
    unfinished: str = ""
    skipped: str = ""  # why oclgrind did not check it at all ("" where it did)

    @property
    def runs_natively(self) -> bool:
        """Safe to run natively: finished, with no access out of bounds."""
        return not self.unfinished and not (self.finding and self.finding.out_of_bounds)


def _under(
    prefix: Sequence[str], folders: Sequence[str], variant: str, backend: str, seed: int,
    dtype: str, timeout_s: float, env: dict[str, str], cpu_s: float | None = None,
    shapes: Sequence[Shape] = SHAPES,
) -> tuple[str, records.Records, int | None]:  # fmt: skip
    """Check one variant at ``shapes`` in a process of its own (``check --one``) under
    the tool ``prefix`` runs: the tool's output, the check's records, and its exit status
    (None: it ran past ``timeout_s``, its output so far kept). ``cpu_s``: each of its
    processes is ended (SIGXCPU) once it has spent that much CPU time."""
    sizes = ",".join(f"{s.M}x{s.K}x{s.N}" for s in shapes)
    with tempfile.TemporaryDirectory(prefix="xbackend-sanitize-") as out:
        kept = Path(out) / "records.jsonl"
        command = [*prefix, sys.executable, "-m", "xbackend", "check", *folders, "--one",
                   "--records", str(kept), "--variants", variant, "--backends", backend,
                   "--steps", "0", "--shapes", sizes, "--seed", str(seed), "--dtype", dtype,
                   "--no-times", "--sanitize", "off"]  # fmt: skip
        try:
            environment = {**child_environment(), RED_ZONE_ENV: "0", **env}  # C's own end
            done = run_to_deadline(command, timeout_s, environment, _cpu_limit(cpu_s))
        except subprocess.TimeoutExpired as expired:
            said = [part.decode(errors="replace") if isinstance(part, bytes) else part or ""
                    for part in (expired.stdout, expired.stderr)]  # fmt: skip
            return "\n".join(said), records.read(kept), None
        return done.stdout + "\n" + done.stderr, records.read(kept), done.returncode


def _cpu_limit(cpu_s: float | None) -> Callable[[], None] | None:
    """What the child runs before the tool: its CPU time capped at ``cpu_s`` (SIGXCPU),
    and a few seconds later for good (SIGKILL); inherited by every process it starts."""
    if cpu_s is None:
        return None
    soft = math.ceil(cpu_s)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 5))

    return limit


def cpu_deadline_s(shapes: Sequence[Shape]) -> float:
    """oclgrind's CPU deadline for a run at ``shapes``: ``BASE_CPU_S``, and
    ``CPU_S_PER_MULTIPLY_ADD`` for each multiply-add of the products (M·N·K each)."""
    return BASE_CPU_S + CPU_S_PER_MULTIPLY_ADD * sum(s.M * s.N * s.K for s in shapes)


def sanitize(
    folders: Sequence[str], variant: str, oclgrind: str, seed: int, dtype: str = "float32",
    timeout_s: float | None = None,
) -> Sanitized:  # fmt: skip
    """Run one variant of the folders under oclgrind, unoptimized builds (oclgrind 21.10
    reads every access of them), at ``SHAPES`` as its rules take them, within its CPU
    deadline (``cpu_deadline_s``; ``timeout_s``: the clock's, ten times that where not
    given). Done means that check wrote its last record with no report cut off; a run
    past ``MAX_CPU_S`` is not made, and a variant oclgrind could not run is ``skipped``.
    A run whose key is in ``XBACKEND_SANITIZER_VERDICTS``'s file takes its recorded
    verdict instead (``grading/sanitized.py``); a finished one is recorded there."""
    shapes = taken_shapes(families.find_variant(variant), SHAPES)
    cpu_s = cpu_deadline_s(shapes)
    if cpu_s > MAX_CPU_S:
        return Sanitized(None, skipped=_too_large(shapes, cpu_s))
    wall_s = timeout_s if timeout_s is not None else WALL_PER_CPU * cpu_s
    key = verdict_key(variant, oclgrind, seed, dtype)
    done = _from_record(sanitized.recorded(key)) if key else None
    if done is None:
        # The kernel's own deadline inside the run is the clock's too: the CPU's decides.
        env = {**_OCLGRIND_ENV, TIMEOUT_ENV: repr(wall_s)}
        log, inner, status = _under([oclgrind, *_OCLGRIND_OPTIONS], folders, variant, "opencl",
                                    seed, dtype, wall_s, env, cpu_s, shapes)  # fmt: skip
        done = _simulated(log, inner, status, wall_s, cpu_s)
        if key and not done.unfinished:
            what = f"{variant} ({dtype}, seed {seed}) at {', '.join(map(records.compact, shapes))}"
            sanitized.record(key, what, dataclasses.asdict(done))
    if done.skipped and _RULE_REFUSED in done.skipped:  # no shape its rules take: the
        return Sanitized(None)  # native check says which
    if done.skipped and _build_failed(done.skipped) and _fails_natively(folders, variant, seed,
                                                                        dtype, shapes):  # fmt: skip
        return Sanitized(None)  # the kernel's own build error: the native check says it
    return done


def _simulated(
    log: str, inner: records.Records, status: int | None, wall_s: float, cpu_s: float
) -> Sanitized:
    """oclgrind's verdict from its run: its worst report, why it did not finish, or why
    it could not run the variant at all."""
    finding = _worst(findings(log))
    if status is None:
        return Sanitized(finding, f"oclgrind took more than {wall_s:g} s")
    if status in (-SIGXCPU, -SIGKILL) and not inner.done:
        return Sanitized(finding, f"oclgrind used its {cpu_s:.0f} s of CPU time")
    unfinished = _unfinished(inner, "oclgrind", status, log, _CAPPED in log, cpu_s)
    if unfinished or finding is not None:
        return Sanitized(finding, unfinished)
    return Sanitized(None, skipped=_not_run(inner, log))


def verdict_key(variant: str, oclgrind: str, seed: int, dtype: str = "float32") -> str:
    """The key of the variant's run under oclgrind in ``XBACKEND_SANITIZER_VERDICTS``'s
    file (``sanitized.key``: its products at ``SHAPES``, their code, operands and build,
    and oclgrind's version and options), or "" where no file is named or what it would
    simulate cannot be told here."""
    if sanitized.verdicts_path() is None:
        return ""
    shapes = taken_shapes(families.find_variant(variant), SHAPES)
    simulator = sanitized.simulator_parts(oclgrind, _OCLGRIND_OPTIONS, _OCLGRIND_ENV)
    planned = sanitized.planned_variant(variant, shapes, seed, dtype) if simulator else None
    if planned is None:
        return ""
    return sanitized.key({**simulator, "dtype": dtype, "products": planned})


def _from_record(recorded: dict[str, Any] | None) -> Sanitized | None:
    """A recorded verdict as ``Sanitized``; None where there is none, or it does not read
    as one (an entry of another version, a hand edit): then oclgrind runs."""
    if recorded is None:
        return None
    try:
        found = recorded.get("finding")
        finding = Finding(**found) if found is not None else None
        return Sanitized(finding, str(recorded["unfinished"]), str(recorded["skipped"]))
    except (TypeError, KeyError, AttributeError):
        return None


def _fails_natively(
    folders: Sequence[str], variant: str, seed: int, dtype: str, shapes: Sequence[Shape]
) -> bool:
    """Whether the variant's build fails on this machine's own OpenCL device too (in a
    check of a process of its own, at the first of ``shapes``)."""
    _, inner, _ = _under([], folders, variant, "opencl", seed, dtype, TIMEOUT_S, {},
                         shapes=shapes[:1])  # fmt: skip
    return any(_build_failed(verdict.detail) for verdict in inner.verdicts)


def _build_failed(said: str) -> bool:
    return any(words in said for words in _BUILD_FAILED)


def _too_large(shapes: Sequence[Shape], cpu_s: float) -> str:
    """Why a run too large for oclgrind is not made: the shapes, the CPU time it needs."""
    shown = ", ".join(records.compact(shape) for shape in shapes)
    taken = "the shape its rules take" if len(shapes) == 1 else "the shapes its rules take"
    return (f"oclgrind would need about {_duration(cpu_s)} of CPU time at {shown} ({taken}; "
            f"a run is given at most {_duration(MAX_CPU_S)})")  # fmt: skip


def _duration(seconds: float) -> str:
    """``20 min``, ``5 h``, ``32 days``: a deadline's size in words."""
    for unit, length in (("days", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= 2 * length or unit == "min":
            return f"{seconds / length:.0f} {unit}"
    return f"{seconds:.0f} s"


def _not_run(inner: records.Records, log: str) -> str:
    """Why oclgrind's run did not check the variant although it ended ("" where it
    did): a verdict that did not run (its build, a launch oclgrind's device refused),
    in oclgrind's own words where it gave them."""
    missed = [v for v in inner.verdicts if v.equal is None]
    if inner.verdicts and not missed:
        return ""
    said = _fatal(log)
    if not said:
        detail = missed[0].detail.split(" (at ")[0] if missed else "no verdict"
        said = re.sub(r"^[A-Z]\w*: ", "", detail)[:200]  # not a Python class's name
    return f"oclgrind could not run it ({said})"


def _fatal(log: str) -> str:
    """oclgrind's own words where it gave up on a kernel (``OCLGRIND FATAL ERROR``, an
    unsupported instruction), its first such line."""
    lines = [line.strip() for line in log.splitlines()]
    for number, line in enumerate(lines):
        if line.startswith("OCLGRIND FATAL ERROR") and number + 1 < len(lines):
            return lines[number + 1][:200]
        if line.startswith(("Unsupported instruction", "Unhandled")):
            return line[:200]
    return ""


def _unfinished(
    inner: records.Records, tool: str, status: int, log: str, capped: bool,
    cpu_s: float | None = None,
) -> str:  # fmt: skip
    """Why a tool's run did not check the variant through ("" where it did)."""
    gone = _gone(inner.verdicts, cpu_s)
    if gone:  # a hang or a crash under the tool would be one natively too
        return gone
    if capped:
        return f"{tool} stopped reporting at its cap of errors"
    if not inner.done:
        said = [line for line in log.strip().splitlines() if line.strip()][-1:] or ["nothing"]
        return f"{tool} ended early (exit {status}): {said[0][:200]}"
    return ""


def _gone(verdicts: Sequence[records.Verdict], cpu_s: float | None = None) -> str:
    """How the kernel's own process went under oclgrind, where it hung or died: at which
    shape, and the isolation's words, or the CPU time it used up ("" where it did not)."""
    for verdict in verdicts:
        if verdict.equal is None and verdict.shape is not None:
            said = verdict.detail
            where = f"its run at {records.compact(verdict.shape)}"
            if cpu_s is not None and "SIGXCPU" in said:
                return f"{where} used its {cpu_s:.0f} s of CPU time"
            if said.startswith("timed out") or said.startswith("the kernel's process"):
                return f"{where} {said.split(':')[0]}"
    return ""


def _worst(by_kernel: dict[str, Finding]) -> Finding | None:
    """The worst of a run's reports, with every out-of-bounds kind of any kernel's on it
    (one variant a run: they are its kernels' reports)."""
    found = list(by_kernel.values())
    if not found:
        return None
    worst = min(found, key=lambda each: _rank(each.what))
    return dataclasses.replace(
        worst,
        reads_out_of_bounds=any(each.reads_out_of_bounds for each in found),
        writes_out_of_bounds=any(each.writes_out_of_bounds for each in found),
    )


# compute-sanitizer's reports: memcheck's "Invalid __global__ write of size 4 bytes", with
# where on its next line ("at kernel+0x1b0 in file.cu:14"); racecheck's "Error: Race
# reported between Write access at kernel+0x650 in file.cu:21", or in older versions
# "at 0x1a0 in file.cu:21:kernel(float*, ...)". The file and line are there where the
# build had -lineinfo (XBACKEND_CUDA_LINEINFO).
_MEMCHECK = re.compile(
    r"^=+ Invalid __(?P<space>\w+)__ (?P<access>read|write) of size (?P<size>\d+ bytes)"
    r"\s*\n=+\s+at (?P<where>[^\n]*)",
    re.MULTILINE,
)
_RACECHECK = re.compile(
    r"^=+ (?:Error|Warning): Race reported between (?P<first>\w+) access at (?P<where>[^\n]*)"
    r"\n=+\s+and (?P<second>\w+) access",
    re.MULTILINE,
)
_KERNEL = re.compile(r"(?:^|:)(?P<name>[A-Za-z_]\w*)(?:<[^>]*>)?(?:\([^)]*\))?(?:\+0x|$)")
_FILE_LINE = re.compile(r" in (?:\S*/)?(?P<file>[^/\s:]+):(?P<line>\d+)")


def _where(text: str, shift: int) -> tuple[str, int]:
    """The kernel and the line of its file a report's location names (0: no line)."""
    place = _FILE_LINE.search(text)
    line = max(0, int(place["line"]) - shift) if place else 0
    rest = text.split(" [")[0]  # "[4 hazards]"
    names = [m["name"] for m in _KERNEL.finditer(rest.replace(" in ", " "))]
    kernel = next((n for n in names if not n.startswith("0x") and n != "in"), "")
    return kernel, line


CUDA_TOOLS = ("memcheck", "racecheck")


def cuda_findings(log: str, shift: int = 0) -> dict[str, Finding]:
    """Each kernel's worst report in compute-sanitizer's output; ``shift``: the lines the
    build put before the kernel's file (``extern "C" {``), taken off its line numbers."""
    found: dict[str, Finding] = {}
    reads: set[str] = set()
    writes: set[str] = set()
    for match in _MEMCHECK.finditer(log):
        kernel, line = _where(match["where"], shift)
        (writes if match["access"] == "write" else reads).add(kernel)
        what = f"Invalid {match['access']} of size {match['size']} ({match['space']})"
        _keep(found, Finding(kernel, what, line, ""))
    for match in _RACECHECK.finditer(log):
        kernel, line = _where(match["where"], shift)
        pair = {match["first"].lower(), match["second"].lower()}
        kind = "Write-write" if pair == {"write"} else "Read-write"
        _keep(found, Finding(kernel, f"{kind} data race (shared)", line, ""))
    return {
        kernel: dataclasses.replace(
            finding, reads_out_of_bounds=kernel in reads, writes_out_of_bounds=kernel in writes
        )
        for kernel, finding in found.items()
    }


def _keep(found: dict[str, Finding], finding: Finding) -> None:
    first = found.get(finding.kernel)
    if first is None or _rank(finding.what) < _rank(first.what):
        found[finding.kernel] = finding


def sanitize_cuda(
    folders: Sequence[str], variant: str, tool: str, seed: int, dtype: str, shift: int,
    tools: Sequence[str] = CUDA_TOOLS, timeout_s: float = TIMEOUT_S,
) -> Sanitized:  # fmt: skip
    """Run one CUDA variant under each of compute-sanitizer's ``tools``, its kernels
    built with -lineinfo; the worst report of any, and why a run did not finish."""
    env = {LINEINFO_ENV: "1"}
    found: dict[str, Finding] = {}
    for name in tools:
        prefix = [tool, "--tool", name, "--target-processes", "all", "--print-limit", "100"]
        log, inner, status = _under(prefix, folders, variant, "cuda", seed, dtype, timeout_s, env)
        for finding in cuda_findings(log, shift).values():
            _keep(found, finding)
        worst = _worst(found)
        if status is None:
            return Sanitized(worst, f"compute-sanitizer {name} took more than {timeout_s:g} s")
        why = _unfinished(inner, f"compute-sanitizer {name}", status, log, capped=False)
        if why:
            return Sanitized(worst, why)
    return Sanitized(_worst(found))
