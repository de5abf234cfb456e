"""Add the choices of tune caches to the shipped tuning database (xbackend/tuning/tuning_db.json).

    XBACKEND_TUNE_CACHE=/tmp/h100.json xbackend tune --backends cuda     # on the device
    python scripts/tuning_db.py /tmp/h100.json --how "xbackend tune --backends cuda"

Each entry of each cache replaces the database's entry of the same key (backend,
device, variant, operation, dtype, shape class); every other entry is kept. An entry
keeps what ``tune`` recorded (parameters, speed, race, ``tuned_at``) and gains ``how``:
the command, the driver and the xbackend version it was measured with. Its ``build``
keeps only the kernel digest, which the database is matched on (see
``xbackend/tuning/database.py``): the driver and the version are a record, not a condition.
An entry without a kernel digest (written by hand, or by an older tune) is refused.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import xbackend.tuning.cache as tune_cache
import xbackend.tuning.database as tuning_db
from xbackend.safeio import atomic_write


def shipped_entry(entry: dict[str, Any], how: str) -> dict[str, Any]:
    """A cache entry as the database holds it (see the module's docstring)."""
    build = entry.get("build") or {}
    if "kernel" not in build:
        raise ValueError("the entry records no kernel digest (tuned by an older xbackend?)")
    record = {name: build[name] for name in ("driver", "xbackend") if name in build}
    measured_with = ", ".join(f"{name} {value}" for name, value in record.items())
    return {
        **entry,
        "build": {"kernel": build["kernel"]},
        "how": f"{how} ({measured_with})" if measured_with else how,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("caches", nargs="+", type=Path, help="tune cache files")
    parser.add_argument("--how", required=True, help="the command that tuned them, and where")
    parser.add_argument("--db", type=Path, default=tuning_db.SHIPPED, help="the database file")
    args = parser.parse_args()
    entries = tune_cache.load_entries(args.db)
    for cache in args.caches:
        added = tune_cache.load_entries(cache)
        if not added:
            print(f"{cache}: no entries of the current format", file=sys.stderr)
            return 1
        for key, entry in added.items():
            try:
                entries[key] = shipped_entry(entry, args.how)
            except ValueError as error:
                print(f"{cache}: {key}: {error}", file=sys.stderr)
                return 1
        print(f"{cache}: {len(added)} entries")
    text = json.dumps({"format": tune_cache.FORMAT, "entries": entries}, indent=1, sort_keys=True)
    atomic_write(args.db, text + "\n")
    print(f"{args.db}: {len(entries)} entries")
    print(json.dumps(sorted({key.split("|")[1] for key in entries}), ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
