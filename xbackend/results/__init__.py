"""Results files: one record per measured point, written as it completes, with the machine.

A run folder holds

* ``results.jsonl``, the record: a line describing each run (machine, packages,
  git commit, ``XBACKEND_*`` settings, plan, devices) before its first point,
  then one line per point, raw samples included. Each line is written in one
  ``write`` as soon as its point is done, so an interrupted run keeps every
  finished point in a file that still parses line by line;
* ``results.csv``: the same points, flat, without the raw samples, derived from
  ``results.jsonl`` (and rebuilt from it whenever the folder is opened to write);
* ``.xbackend.lock``: held by the run writing the folder, so there is one at a time;
* the figures (``figures/plots.py``) and the report (``xbackend.report``).

The modules: ``records`` (the typed records and the only knowledge of older
files), ``reading`` (:func:`load`, every line checked), ``writing`` (the writer,
the CSV, the lock).
"""

from xbackend.results.reading import (
    CSV_NAME,
    JSONL_NAME,
    FolderBusy,
    Loaded,
    ResultsError,
    latest,
    load,
    warn_on_stderr,
)
from xbackend.results.records import (
    MEASURED,
    STATUSES,
    WORKER_LOST,
    Identity,
    LineKey,
    PointKey,
    PointRecord,
    RecordError,
    RunHeader,
    now_iso,
)
from xbackend.results.writing import CSV_FIELDS, ResultsWriter, RunLock, write_csv

__all__ = [
    "CSV_FIELDS",
    "CSV_NAME",
    "JSONL_NAME",
    "MEASURED",
    "STATUSES",
    "WORKER_LOST",
    "FolderBusy",
    "Identity",
    "LineKey",
    "Loaded",
    "PointKey",
    "PointRecord",
    "RecordError",
    "ResultsError",
    "ResultsWriter",
    "RunHeader",
    "RunLock",
    "latest",
    "load",
    "now_iso",
    "warn_on_stderr",
    "write_csv",
]
