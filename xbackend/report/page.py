"""One report from results, written: a self-contained HTML page and its Markdown twin.

The points of one or more results files are grouped into the experiments they
were measured for (the run's ``plan.preset``, or, for older runs, what the
operation and the sizes say), and each experiment gets the figures and tables
its source document asks for (``sections.py``); where results of several machines
measured the same configurations, those machines side by side (``analysis/side_by_side.py``); then
code equality (counts, every wrong result and error in plain sight, the full log folded
away) and the machines every run happened on (``equality.py``). The report opens with
its findings (``findings.py``): a few sentences computed from the results; then, where
two APIs ran on one device, their own ceilings side by side and the audit of what each
ratio of the two compares (``control.py``). Where the kernels timed
themselves on the GPU's clock, the launch overhead has a section of its own
(``overhead.py``), and the head of the report names the clock that timed each backend's
kernels (``clocks.clock_note``); where ``--energy`` read the device's energy counter, the
energy per product has one too (``energy.py``).

The page reads short: a run of many sizes shows a table of its key sizes, with the whole
table folded away (``<details>``) and written as ``report_figures/EXPERIMENT/sizes.csv``
(``sizes.py``); the ceilings' measurement, every point's log line and each run's machine,
kernel sources and settings are folded away too, and so are the roofline's and the launch
overhead's tables (their figures stand at the right of their text). The Markdown, which
cannot fold, keeps the order and puts what the page folds in an appendix at its end.
The roofline, the shares and the check of times too fast to be true take one set of
ceilings per device (``roofs.roofs``, ``roofs.checked``), and the figures draw noisy
points hollow and leave out throttled and untrusted ones, saying how many.

The page is one file (figures embedded as PNG data URIs, inline CSS) so it can be
mailed or archived as it is; the Markdown refers to the figures in ``report_figures/``,
or to those the command drew already next to the results (``compare``).
A wrong result never passes for a time: tables flag it, figures draw it as a red cross.

Results files may come from anywhere, so their strings are data, never structure: file
names are made of :func:`~xbackend.safeio.safe_name` parts (kept apart where two values
sanitise alike), every file is written whole and never through a link, the page and the
Markdown escape every string (one line, no markup, a code fence no string can close),
and figures draw a ``$`` as a dollar sign.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from xbackend.analysis.clocks import clock_note
from xbackend.analysis.roofs import checked, roofs
from xbackend.analysis.side_by_side import base_machine
from xbackend.figures.plots import Drawn
from xbackend.report.control import ceilings_section, fairness_section
from xbackend.report.counters import counters_section
from xbackend.report.document import Block, Heading, Paragraph, render_html, render_markdown
from xbackend.report.energy import energy_section
from xbackend.report.equality import equality, machines
from xbackend.report.figures import FigureFolder
from xbackend.report.findings import findings_section
from xbackend.report.overhead import overhead_section
from xbackend.report.points import EXPERIMENTS, experiment_of, group
from xbackend.report.roofline import roofline_section
from xbackend.report.sections import SECTIONS, SpeedUp, speedups
from xbackend.report.side_by_side import machines_section
from xbackend.results import Loaded, PointRecord, latest, load, warn_on_stderr
from xbackend.results.reading import RunNames, apart, load_runs
from xbackend.safeio import atomic_write, output_folder, refuse_link

__all__ = [
    "EXPERIMENTS",
    "FIGURES_DIR",
    "HTML_NAME",
    "MARKDOWN_NAME",
    "SpeedUp",
    "experiment_of",
    "load",
    "speedups",
    "write_report",
    "write_report_of",
]

HTML_NAME = "report.html"
MARKDOWN_NAME = "report.md"
FIGURES_DIR = "report_figures"


def write_report(paths: Sequence[Path], out: Path, *, base_host: str | None = None) -> list[Path]:
    """Write ``report.html``, ``report.md`` and ``report_figures/`` into ``out``.

    ``paths`` are results folders or ``results.jsonl`` files; a line that cannot be
    read is skipped with a warning on stderr. ``base_host``: the machine the others are
    compared with where the results come from several (default: the first host met).
    Returns the files written.

    Raises :class:`~xbackend.safeio.UnsafePath` (a ValueError) where ``out`` cannot be
    a folder, or a symbolic link stands where a file or folder of the report goes.
    """
    loaded, run_names = load_runs(paths, warn=warn_on_stderr, reader=load)
    return write_report_of(loaded, out, sources=paths, run_names=run_names, base_host=base_host)


def write_report_of(
    loaded: Loaded,
    out: Path,
    *,
    sources: Sequence[Path],
    drawn: Drawn | None = None,
    run_names: RunNames | None = None,
    base_host: str | None = None,
) -> list[Path]:
    """The report of results already read (from ``sources``), written into ``out``.

    A point measured more than once in one run counts once, as last recorded; where
    several runs measured the same point of an experiment, each run's lines are shown
    apart, named by their run (``run_names``, from ``results.reading.load_runs``; None:
    the run ids). ``drawn``: generic figures the command drew already; where a part of
    the report shows the same points, it shows those files instead of drawing again.
    Where several machines measured the same configuration, a section puts them side by
    side against ``base_host`` (a host, device or machine name; default: the first met).
    """
    runs = loaded.runs
    # Runs are told apart within each experiment only: the lab and the blog may both
    # have measured 1024³, and neither may take the other's point nor rename it.
    by_experiment = group(loaded.points, lambda p: experiment_of(p, runs))
    measured = roofs(runs.values())  # one set of ceilings per device
    # One rule for times too fast to be true (roofs.checked): the measured ceilings too.
    points = checked([p for part in by_experiment.values() for p in latest(apart(part, run_names))],
                     measured)  # fmt: skip
    measured_on = checked(latest(loaded.points), measured)  # as measured, each on its machine
    base_machine(measured_on, base_host)  # before drawing: a machine asked for must be there
    output_folder(out)
    html_path, markdown_path = out / HTML_NAME, out / MARKDOWN_NAME
    for path in (html_path, markdown_path):
        refuse_link(path)  # before drawing anything: atomic_write would refuse it at the end
    found = group(points, lambda p: experiment_of(p, runs))
    experiments = {name: found[name] for name in EXPERIMENTS if name in found}
    blocks = _head(points, len(runs), sources)
    blocks += findings_section(points)  # what the run found, before how
    blocks += ceilings_section(runs) + fairness_section(sources)  # the control: control.py
    figures = FigureFolder(out, (FIGURES_DIR,), drawn, measured)
    written: list[Path] = []
    for name, points_of in experiments.items():
        blocks.append(Heading(EXPERIMENTS[name], 2))
        section, files = SECTIONS[name](points_of, figures / name)
        blocks += section
        written += files
    sections = (
        machines_section(measured_on, figures / "machines", base=base_host),
        roofline_section(points, figures, runs),
        overhead_section(points, figures),  # where the kernels timed themselves
        energy_section(points, figures),  # where --energy read the device's counter
        counters_section(points, figures, runs),  # xbackend profile's points
    )
    for section, files in sections:
        blocks += section
        written += files
    blocks += equality(experiments)
    blocks += machines(runs, points)
    atomic_write(html_path, render_html(_TITLE, blocks))
    atomic_write(markdown_path, render_markdown(blocks, out))
    return [html_path, markdown_path, *written]


_TITLE = "xbackend report"


def _head(points: list[PointRecord], runs: int, sources: Sequence[Path]) -> list[Block]:
    checked = [p for p in points if p.status in ("ok", "mismatch", "error")]
    ok = sum(p.status == "ok" for p in checked)
    skipped = sum(p.status == "skipped" for p in points)
    return [
        Heading(_TITLE, 1),
        Paragraph(
            f"{len(points)} points from {runs} run{'s' * (runs != 1)} "
            f"({', '.join(str(p) for p in sources)}): "
            f"{ok} of {len(checked)} checked results equal to the reference, "
            f"{skipped} skipped. Times are medians of the timed samples."
            + (f" {note[0].upper()}{note[1:]}." if (note := clock_note(points)) else "")
        ),
    ]
