"""The report's findings: a few sentences, computed from the results, that say what the run found.

Each sentence is made of numbers the tables below show too, and is left out where its
data is missing (a backend without a tiled kernel has no speed-up, a run whose kernels
did not time themselves no launch overhead):

* per backend, tiled against naive (and a user family's variants against its own naive)
  at the largest size both measured, with an interval, and from which size the answer
  holds (``analysis/speedups.py``);
* per variant, the backends against each other at the largest size they all measured,
  on the kernel time (naming the clock that timed each) and end-to-end: one table, a row
  per variant (``comparison_table``; ``findings`` says them as sentences);
* per backend whose kernels timed themselves, the median launch overhead;
* per backend, its vendor's library against its best own kernel;
* code equality in one line, and how many points were noisy, throttled or untrusted.

Only verified, trusted points count (``status`` "ok", not above the device's peak); a
noisy or throttled one counts and is marked so wherever its number is used.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence

from xbackend.analysis.clocks import clock_name
from xbackend.analysis.speedups import DOUBTFUL, Speedup, speedups, usable, work
from xbackend.measuring import contention, host_load
from xbackend.measuring.timing import format_seconds
from xbackend.report.document import Block, Cell, Heading, Paragraph, Sentences, Table
from xbackend.report.points import ambiguous_labels, group, size_text, three_digits
from xbackend.results import PointRecord

VENDOR_VARIANTS = ("vendor",)
_Group = tuple[str, int, str]  # operation, batch, data type


def counted(point: PointRecord) -> bool:
    """Whether a point counts in the findings: verified, trusted, and timed with an
    end-to-end time beside (not a profiled point). A noisy or throttled one counts, and
    each sentence and cell that uses it says so (:func:`_marked`): the findings once left
    them out and fell back to a size small enough to be quiet, another question."""
    return usable(point)


def _marked(point: PointRecord) -> str:
    """ " (noisy)", " (noisy, throttled)" or "": what a number of ``point`` carries."""
    flags = [flag for flag in DOUBTFUL if flag in point.flags]
    return f" ({', '.join(flags)})" if flags else ""


def _kernel_s(point: PointRecord) -> float:
    return (point.kernel_s or {})["median"]


def _end_to_end_s(point: PointRecord) -> float | None:
    return (point.end_to_end_s or {}).get("median")


def _variant_name(point: PointRecord) -> str:
    return point.variant + (f" T={point.tile}" if point.tile else "")


def _faster(ratio: float) -> str:
    """``ratio`` (slow over fast) as "4.30× faster", or "2.00× slower" below 1."""
    if ratio >= 1:
        return f"{three_digits(ratio)}× faster"
    return f"{three_digits(1 / ratio)}× slower"


def _fastest(points: Iterable[PointRecord]) -> PointRecord:
    """The point with the shortest median kernel time (the first of equals)."""
    return min(points, key=_kernel_s)


def _largest_common(
    sides: Sequence[Sequence[PointRecord]],
) -> tuple[int, int, int, int] | None:
    """The largest size every side measured (by ``speedups.work``), or None."""
    common = set.intersection(*({work(p) for p in side} for side in sides))
    return max(common) if common else None


def _at(points: Iterable[PointRecord], size: tuple[int, int, int, int]) -> list[PointRecord]:
    return [p for p in points if work(p) == size]


class _Names:
    """How sentences name a backend: its label, with its device where the label names
    several; and the operation and data type where the results hold several."""

    def __init__(self, points: Sequence[PointRecord]) -> None:
        self.ambiguous = ambiguous_labels((p.label, p.device) for p in points)
        self.groups = {(p.op, p.batch, p.dtype) for p in points}

    def backend(self, point: PointRecord) -> str:
        if point.label in self.ambiguous:
            return f"{point.label} ({point.device})"
        return point.label

    def on(self, point: PointRecord) -> str:
        """ "On opencl (AMD EPYC)": the backend with its device, always."""
        return f"On {point.label} ({point.device})"

    def where(self, point: PointRecord) -> str:
        """ " (mm, float32)" where the results hold several operations or data types."""
        return f" ({point.op}, {point.dtype})" if len(self.groups) > 1 else ""


def _fastest_pairs(
    points: Sequence[PointRecord],
    first: Callable[[PointRecord], bool],
    second: Callable[[PointRecord], bool],
) -> list[tuple[PointRecord, PointRecord]]:
    """Per backend, device and group: the fastest point of each side (``first``,
    ``second``) at the largest size both sides measured."""
    found = []
    by_backend = group(points, lambda p: (p.label, p.device, p.op, p.batch, p.dtype))
    for part in by_backend.values():
        ones, twos = [p for p in part if first(p)], [p for p in part if second(p)]
        size = _largest_common([ones, twos]) if ones and twos else None
        if size is not None:
            found.append((_fastest(_at(ones, size)), _fastest(_at(twos, size))))
    return found


def _speedup_sentence(found: Speedup, names: _Names) -> str:
    """One variant against its baseline: at the largest size, with its interval, and
    from which size the answer holds."""
    last = found.largest
    fast, slow = last.variant, last.baseline
    doubt = f"; {' and '.join(last.doubtful)}" if last.doubtful else ""
    where = f"{names.on(fast)}, {_variant_name(fast)}"
    at = f"at {size_text(fast)}{names.where(fast)}, the largest size both measured"
    interval = f"{three_digits(last.low)}–{three_digits(last.high)}×"
    if last.verdict == "unclear":
        sentence = (
            f"{where} and {_variant_name(slow)} cannot be told apart {at}: "
            f"{three_digits(last.value)}× ({interval} from the two medians' 95% "
            f"intervals{doubt})"
        )
        clear = found.largest_clear()
        if clear is not None:
            sentence += (
                f"; the largest size where one is clearly faster is {size_text(clear.variant)}"
                f": {_variant_name(clear.variant)} {_faster(clear.value)}"
            )
        return sentence + "."
    first = found.holds_from()
    assert first is not None
    held = sum(r.size >= first.size for r in found.ratios)
    span = (
        f"{last.verdict} at every size from {size_text(first.variant)} up ({held} of "
        f"{len(found.ratios)} sizes)" if held > 1 else f"{last.verdict} at that size alone"
    )  # fmt: skip
    return (
        f"{where} is {_faster(last.value)} than {_variant_name(slow)} {at} "
        f"({interval} from the two medians' 95% intervals{doubt}): "
        f"{format_seconds(_kernel_s(fast))} against {format_seconds(_kernel_s(slow))} "
        f"median kernel time; {span}."
    )


def tiled_over_naive(points: Sequence[PointRecord], names: _Names) -> list[str]:
    """Per backend, device and group: tiled against naive, and each of a user family's
    variants against the family's own naive (``analysis/speedups.py``), at the largest size both
    measured, noisy points included and said."""
    return [_speedup_sentence(found, names) for found in speedups(points)]


def _against(
    fastest: PointRecord, others: Sequence[PointRecord], names: _Names,
    time: Callable[[PointRecord], float],
) -> str:  # fmt: skip
    """ "opencl is 25.8× faster than cpu": the fastest against each of the others."""
    ratios = [f"{_faster(time(other) / time(fastest))} than {names.backend(other)}"
              for other in others]  # fmt: skip
    return f"{names.backend(fastest)} is {', '.join(ratios)}"


def _clock(point: PointRecord) -> str:
    """The clock's name without its aside: "GPU clock inside the kernels"."""
    return clock_name(point.clock).split(" (")[0]


def _times(
    points: Sequence[PointRecord], names: _Names, time: Callable[[PointRecord], float],
    clocks: bool = False,
) -> str:  # fmt: skip
    """ "opencl 291 µs, cpu 7.51 ms (noisy)", each with the clock that timed it where
    ``clocks`` and the clocks differ, and its flags."""
    several = clocks and len({p.clock for p in points}) > 1
    return ", ".join(
        f"{names.backend(p)} {format_seconds(time(p))}"
        + (f" ({_clock(p)})" if several else "") + _marked(p)
        for p in points
    )  # fmt: skip


def _backends_sentence(sides: list[PointRecord], names: _Names) -> str:
    """One variant on several backends at one size: kernel time, then end-to-end."""
    sides.sort(key=_kernel_s)
    first = sides[0]
    clocks = {_clock(p) for p in sides}
    clock = f" on the {next(iter(clocks))}" if len(clocks) == 1 else ""
    kind = "lines" if first.variant in VENDOR_VARIANTS else "kernels"
    sentence = (
        f"The {first.variant} {kind} at {size_text(first)}{names.where(first)}, median "
        f"kernel time{clock}: {_times(sides, names, _kernel_s, clocks=True)}; "
        f"{_against(first, sides[1:], names, _kernel_s)}."
    )
    ends = [p for p in sides if _end_to_end_s(p) is not None]
    if len(ends) == len(sides):

        def end_to_end(point: PointRecord) -> float:
            return _end_to_end_s(point) or 0.0

        ends.sort(key=end_to_end)
        sentence += (
            f" End-to-end, with transfers: {_times(ends, names, end_to_end)}; "
            f"{_against(ends[0], ends[1:], names, end_to_end)}."
        )
    return sentence


def backend_against_backend(points: Sequence[PointRecord], names: _Names) -> list[str]:
    """Per variant and group measured by several backends: the sentence that compares them
    (:func:`comparisons`)."""
    return [_backends_sentence(sides, names) for sides in comparisons(points)]


def comparisons(points: Sequence[PointRecord]) -> list[list[PointRecord]]:
    """Per variant and group measured by several backends: each backend's fastest tile
    of it at the largest size they all measured (a backend that shares no size with the
    others is left out, the one with the fewest sizes first)."""
    found = []
    by_variant = group(points, lambda p: (p.variant, p.op, p.batch, p.dtype))
    for part in by_variant.values():
        sides = list(group(part, lambda p: (p.label, p.device)).values())
        sides.sort(key=len, reverse=True)
        while len(sides) > 1 and _largest_common(sides) is None:
            sides.pop()
        size = _largest_common(sides) if len(sides) > 1 else None
        if size is not None:
            found.append([_fastest(_at(s, size)) for s in sides])
    return found


def launch_overheads(points: Sequence[PointRecord], names: _Names) -> list[str]:
    """Per backend whose kernels timed themselves: the median launch overhead of its
    points (each the API's median time per launch less the kernels' span)."""
    found = []
    timed = [p for p in points if p.overhead_s is not None]
    for part in group(timed, lambda p: (p.label, p.device)).values():
        values = [p.overhead_s for p in part if p.overhead_s is not None]
        first = part[0]
        found.append(
            f"A launch on {names.backend(first)} costs "
            f"{three_digits(statistics.median(values) * 1e6)} µs beyond its kernel (median of "
            f"{len(values)} point{'s' * (len(values) != 1)}: the API's time per launch less "
            "the kernels' span on the GPU's clock)."
        )
    return found


def vendor_lines(points: Sequence[PointRecord], names: _Names) -> list[str]:
    """Per backend and group: its vendor's library against its best own kernel, at the
    largest size where both were measured."""
    found = []
    pairs = _fastest_pairs(
        points, lambda p: p.variant in VENDOR_VARIANTS, lambda p: p.variant not in VENDOR_VARIANTS
    )
    for library, best in pairs:
        ratio = _kernel_s(best) / _kernel_s(library)
        found.append(
            f"{names.on(library)}, the vendor's library ({library.variant}) is "
            f"{_faster(ratio)} than the best own kernel ({_variant_name(best)}) at "
            f"{size_text(library)}{names.where(library)}: "
            f"{format_seconds(_kernel_s(library))}{_marked(library)} against "
            f"{format_seconds(_kernel_s(best))}{_marked(best)}.{_contended(library, best)}"
        )
    return found


def _contended(*points: PointRecord) -> str:
    """ " Measured on a contended host (...)": where a ratio's points were measured on a
    contended host (``contention.contended``, or other processes took half a core or
    more), what it took from each, in a sentence; "" where neither was."""
    said = []
    for point in points:
        load = point.host_load
        if contention.contended(load) or host_load.busy(load):
            others = f"others took {float((load or {}).get('others_cores', 0)):.2g} cores"
            said.append(f"{_variant_name(point)}: {contention.figures(load) or others}")
    if not said:
        return ""
    return (
        f" Measured on a contended host ({'; '.join(said)}): the ratio moves with the "
        "host's load, not with the kernels alone."
    )


def equality_line(points: Sequence[PointRecord]) -> list[str]:
    """Code equality in one line: results equal to the reference, of those checked."""
    checked = [p for p in points if p.status in ("ok", "mismatch", "error")]
    if not checked:
        return []
    ok = sum(p.status == "ok" for p in checked)
    wrong = sum(p.status == "mismatch" for p in checked)
    errors = sum(p.status == "error" for p in checked)
    line = f"{ok}/{len(checked)} points equal to the float64 reference"
    if any(p.check == "freivalds" for p in checked):
        line += " (the largest checked by Freivalds' random vectors)"
    problems = [f"{wrong} wrong" if wrong else "", f"{errors} failed" if errors else ""]
    if wrong or errors:
        line += f"; {' and '.join(filter(None, problems))}: see Code equality"
    return [line + "."]


def doubtful_line(points: Sequence[PointRecord]) -> list[str]:
    """How many measured points were noisy, throttled or above their device's peak, and
    so left out of the sentences above."""
    measured = [p for p in points if p.measured]
    if not measured:
        return []
    counts = {
        "noisy": sum("noisy" in p.flags for p in measured),
        "throttled": sum("throttled" in p.flags for p in measured),
        "untrusted (timed above the device's peak)": sum(not p.trusted for p in measured),
    }
    shown = [f"{count} {what}" for what, count in counts.items() if count]
    if not shown:
        return [f"None of the {len(measured)} measured points is noisy, throttled or untrusted."]
    untrusted = sum(not p.trusted and p.status == "ok" for p in measured)
    left_out = (
        f"; the {untrusted} untrusted, verified, {'is' if untrusted == 1 else 'are'} left "
        "out of these sentences" if untrusted else ""
    )  # fmt: skip
    return [
        f"Of {len(measured)} measured points, {', '.join(shown)}{left_out}. A noisy or "
        "throttled number is marked where a sentence or the table uses it, and in the "
        "tables below."
    ]


def busy_line(points: Sequence[PointRecord]) -> list[str]:
    """Where other processes took the host while points were measured, or its own speed
    changed under noisy ones, a sentence each."""
    measured = [p for p in points if p.measured]
    noisy = [p.host_load for p in measured if "noisy" in p.flags]
    said = host_load.sentences([p.host_load for p in measured], noisy)
    return [line[0].upper() + line[1:] + "." for line in said]


def findings(points: Sequence[PointRecord]) -> list[str]:
    """Every finding of ``points``, as sentences, in the order the report shows them."""
    kept = [p for p in points if counted(p)]
    names = _Names(kept)
    return [
        *tiled_over_naive(kept, names),
        *backend_against_backend(kept, names),
        *launch_overheads(kept, names),
        *vendor_lines(kept, names),
        *equality_line(points),
        *doubtful_line(points),
        *busy_line(points),
    ]


def _ratio_cell(
    sides: list[PointRecord], names: _Names, time: Callable[[PointRecord], float]
) -> str:
    """ "cuda 1.23×": the fastest and its time's ratio to the other's; with several others,
    each named ("opencl 25.8× cpu, 1.02× cuda")."""
    ordered = sorted(sides, key=time)
    first, others = ordered[0], ordered[1:]
    if len(others) == 1:
        return f"{names.backend(first)} {three_digits(time(others[0]) / time(first))}×"
    ratios = [f"{three_digits(time(o) / time(first))}× {names.backend(o)}" for o in others]
    return f"{names.backend(first)} {', '.join(ratios)}"


def _kernel_cell(point: PointRecord, clock: bool) -> str:
    """ "291 µs", with the clock that timed it where ``clock`` (the row's clocks differ),
    and its flags."""
    return (
        format_seconds(_kernel_s(point))
        + (f" ({_clock(point)})" if clock else "")
        + (_marked(point))
    )


def comparison_table(points: Sequence[PointRecord]) -> list[Block]:
    """Backend against backend, one row per variant (the sentences of
    :func:`backend_against_backend` as a table): the size, each backend's median kernel
    time and which is faster by how much, then the same end-to-end, with transfers."""
    kept = [p for p in points if counted(p)]
    names = _Names(kept)
    found = comparisons(kept)
    if not found:
        return []
    backends = list(dict.fromkeys(names.backend(p) for sides in found for p in sides))
    header = ["variant", "size", *(f"kernel: {b}" for b in backends), "faster",
              *(f"end-to-end: {b}" for b in backends), "faster"]  # fmt: skip
    rows = []
    for sides in found:
        by_name = {names.backend(p): p for p in sides}
        several = len({p.clock for p in sides}) > 1  # name each clock where they differ
        ends = len([p for p in sides if _end_to_end_s(p) is not None]) == len(sides)

        def end_to_end(point: PointRecord) -> float:
            return _end_to_end_s(point) or 0.0

        first = sides[0]
        rows.append([
            Cell(first.variant + (" (library)" if first.variant in VENDOR_VARIANTS else "")),
            Cell(size_text(first) + names.where(first)),
            *(Cell(_kernel_cell(by_name[b], several) if b in by_name else "—", "wrap")
              for b in backends),  # a time and its clock's name: wrapped on the page
            Cell(_ratio_cell(sides, names, _kernel_s)),
            *(Cell(format_seconds(end_to_end(by_name[b])) if ends and b in by_name else "—")
              for b in backends),
            Cell(_ratio_cell(sides, names, end_to_end) if ends else "—"),
        ])  # fmt: skip
    clocks = {_clock(p) for sides in found for p in sides}
    on = f" on the {next(iter(clocks))}" if len(clocks) == 1 else ""
    return [
        Paragraph(
            f"Backend against backend, per variant at the largest size they all measured: "
            f"median kernel time{on}, then end-to-end with transfers; faster: the fastest "
            "backend and how many times its time the other takes."
        ),
        Table(header, rows, numeric=False),
    ]


def findings_section(points: Sequence[PointRecord]) -> list[Block]:
    """The report's opening section: the findings as a list, the backends against each
    other as one table; nothing where there are none."""
    kept = [p for p in points if counted(p)]
    names = _Names(kept)
    before = tiled_over_naive(kept, names)
    after = [
        *launch_overheads(kept, names),
        *vendor_lines(kept, names),
        *equality_line(points),
        *doubtful_line(points),
        *busy_line(points),
    ]
    table = comparison_table(points)
    if not (before or table or after):
        return []
    return [
        Heading("Findings", 2),
        Paragraph(
            "Computed from the results below. Only verified points count, none timed above "
            "its device's peak; a noisy or throttled one is marked so. Ratios are of median "
            "times at the largest size both sides measured."
        ),
        *([Sentences(before)] if before else []),
        *table,
        *([Sentences(after)] if after else []),
    ]
