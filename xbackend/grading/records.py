"""What a submission's check process hands back, one JSON line at a time.

The process checking one submission appends a line to its records file as each verdict
is reached, each time measured and each variant described, flushed at once: a process
that a kernel kills, or a check interrupted, leaves every line written before. The
class's process reads them back (``read``) for the gradebook; a last ``done`` line says
the submission's check ended by itself.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from xbackend.operations import Shape

# The tool that sanitizes each language's kernels, and the compiler that builds a .cu file
# where nothing here runs it: their verdicts' labels, beside the backends' own.
SANITIZERS = {"opencl": "oclgrind", "cuda": "compute-sanitizer"}
COMPILER = "nvcc"

# The verdict words, the only ones check.csv, gradebook.csv, the pages and the terminal say
# of a kernel, with what each means (docs/grading.md lists them, and a test holds the two
# alike). ``compiles`` is never a pass: nothing ran the kernel.
WORDS = {
    "equal": "equal to the float64 reference within its bound at every shape it ran and at "
    "every run downloaded where it was timed (not each launch inside a short kernel's batch: "
    "only its last is downloaded), with no sanitizer finding",
    "WRONG": "a result outside its bound at some shape, or a sanitizer's finding (a write "
    "out of bounds, a race, a read of memory never written)",
    "NOT RUN": "it did not run at some shape: it did not compile, a launch failed, a "
    "sanitizer did not finish it, no backend here runs it, its process died or hung",
    "compiles": "nvcc built it and no CUDA device here ran it: never a pass",
    "not sanitized": "the sanitizer could not check it (a feature it does not simulate, a "
    "build it rejects, a shape too large to simulate), and says why; the kernel was still "
    "run natively, and its word there is its own",
}


def language_of(label: str) -> str:
    """The backend a verdict's row belongs to: a sanitizer's or the compiler's goes to the
    backend that runs its language; a backend's own stays its own."""
    by_tool = {tool: language for language, tool in SANITIZERS.items()}
    return by_tool.get(label, "cuda" if label == COMPILER else label)


def compact(shape: Shape | None) -> str:
    """A shape as check prints it: ``7×13·13×5`` ("-" for none)."""
    return f"{shape.M}×{shape.K}·{shape.K}×{shape.N}" if shape is not None else "-"


@dataclasses.dataclass(frozen=True)
class Verdict:
    """One kernel at one shape: equal to the reference, wrong (and how), or not run."""

    label: str  # the backend, as --backends names it; "oclgrind", "compute-sanitizer", "nvcc"
    variant: str
    shape: Shape | None  # None: the kernel did not get as far as a shape
    equal: bool | None  # None: it did not run
    detail: str  # the largest error in bounds, NaNs, or why it did not run

    @property
    def word(self) -> str:
        if self.equal and self.shape is None:  # a build nothing here ran, or a sanitizer's skip
            return "compiles" if self.label == COMPILER else "not sanitized"
        return {True: "equal", False: "WRONG", None: "NOT RUN"}[self.equal]


@dataclasses.dataclass(frozen=True)
class Timing:
    """One kernel's median time at a shape, with the 95% interval of that median."""

    label: str
    variant: str
    shape: Shape
    median_s: float
    low_s: float
    high_s: float
    clock: str  # "globaltimer" (the device's span), else the API's events
    samples: int
    dtype: str = "float32"

    @property
    def spread(self) -> float:
        """The interval's half-width as a share of the median (0.02: ±2%)."""
        return (self.high_s - self.low_s) / 2 / self.median_s if self.median_s > 0 else 0.0


@dataclasses.dataclass(frozen=True)
class Described:
    """A variant as its manifest declares it: its family, kernel function and files."""

    variant: str
    family: str
    kernel: str
    files: dict[str, str]  # language -> file name
    dtype: str


@dataclasses.dataclass(frozen=True)
class Records:
    """Everything one submission's process wrote, in order; ``done``: it ended by itself."""

    verdicts: list[Verdict]
    timings: list[Timing]
    variants: list[Described]
    done: bool


_KINDS: dict[str, type[Verdict] | type[Timing] | type[Described]] = {
    "verdict": Verdict, "timing": Timing, "variant": Described,
}  # fmt: skip


def write(stream: IO[str], record: Verdict | Timing | Described | None) -> None:
    """One line for ``record`` (None: the ``done`` line), flushed."""
    if record is None:
        line: dict[str, Any] = {"done": True}
    else:
        kind = next(k for k, cls in _KINDS.items() if isinstance(record, cls))
        fields = dataclasses.asdict(record)
        shape = getattr(record, "shape", None)
        if "shape" in fields:
            fields["shape"] = [shape.M, shape.K, shape.N] if shape is not None else None
        line = {kind: fields}
    stream.write(json.dumps(line) + "\n")
    stream.flush()


def read(path: Path) -> Records:
    """The records of ``path``; a line cut short by a process that died is left out."""
    found = Records([], [], [], False)
    for line in _lines(path):
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue  # the last line of a process killed mid-write
        if data.get("done"):
            found = dataclasses.replace(found, done=True)
            continue
        for kind, fields in data.items():
            made = _made(kind, fields)
            if isinstance(made, Verdict):
                found.verdicts.append(made)
            elif isinstance(made, Timing):
                found.timings.append(made)
            elif isinstance(made, Described):
                found.variants.append(made)
    return found


def _lines(path: Path) -> Iterator[str]:
    try:
        with path.open(encoding="utf-8", errors="replace") as stream:
            yield from (line for line in stream if line.strip())
    except FileNotFoundError:
        return


def _made(kind: str, fields: Any) -> Verdict | Timing | Described | None:
    cls = _KINDS.get(kind)
    if cls is None or not isinstance(fields, dict):
        return None
    shape = fields.get("shape")
    if isinstance(shape, list) and len(shape) == 3:
        fields = {**fields, "shape": Shape(*(int(v) for v in shape))}
    try:
        return cls(**fields)
    except TypeError:  # a line of another version's: left out
        return None
