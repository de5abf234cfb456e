"""The tuning database shipped with xbackend: tuned choices for the devices we measured.

As CLBlast ships its tuning results, xbackend ships ``xbackend/tuning/tuning_db.json``: the
choices of ``xbackend tune`` on the devices the project could measure, keyed as the
user's tune cache is (``tune_cache.entry_key``: backend, device name, variant,
operation, dtype, shape class). A tuned variant takes its configuration from the
user's own cache first; where that has no entry for the product, from this database;
where neither has one, from the default derived from the device's limits
(``launches/warp.py``). A user's entry always wins, a tie included: a user whose tune
found the default best gets the default, not the database's choice.

Each entry records how and when it was measured (``how``: the command and the machine;
``tuned_at``), beside the fields of a cache entry. Its ``build`` holds only the digest
of the kernel file's code (comments left out) and its fixed options: the database holds
on any driver and for the version it ships with, but an entry whose kernel has changed
since it was measured is ignored (with a ``TuneCacheWarning``), as a stale cache entry
is. A test keeps every entry's digest equal to the kernel files', so an edit of a
kernel's code fails it until the database is measured again (``scripts/tuning_db.py``).

``XBACKEND_TUNING_DB`` names another database file, or ``off`` to hide it (as the
docs' untuned measurements do).

Both files of choices, this database and the user's tune cache, are named by a variable
a user may point anywhere, so both are read by ``safeio.read_small_text`` without
trusting what the path is: a device, a FIFO or a runaway file is refused, never read.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from xbackend.safeio import MAX_READ_BYTES

DB_ENV = "XBACKEND_TUNING_DB"
HIDDEN = "off"
SHIPPED = Path(__file__).resolve().parent / "tuning_db.json"
# The largest database or cache read (safeio's bound): far above any real one (the
# shipped database holds 72 entries in 60 kB; 64 MiB would hold some 80 000).
MAX_FILE_BYTES = MAX_READ_BYTES


def db_path() -> Path | None:
    """The database in use: ``XBACKEND_TUNING_DB``'s file, the shipped one, or None
    where it is hidden (``XBACKEND_TUNING_DB=off``)."""
    chosen = os.environ.get(DB_ENV, "")
    if chosen.strip().lower() == HIDDEN:
        return None
    return Path(chosen) if chosen else SHIPPED


def stale_fields(recorded: dict[str, Any], wanted: dict[str, str]) -> list[str]:
    """The fields of a database entry's ``build`` that differ from the product's: only
    those it records (the kernel digest), not the driver or xbackend's version."""
    return sorted(name for name in recorded if recorded[name] != wanted.get(name))
