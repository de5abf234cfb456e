#!/usr/bin/env bash
# Stands in for Nsight Compute (ncu) in the tests of `xbackend profile`.
#   ncu --version                      prints a version
#   ncu --import REPORT --csv ...      prints REPORT: here, a CSV ncu printed on a GPU
#   ncu --export REPORT ... PROGRAM    copies $FAKE_NCU_CSV to REPORT, then runs PROGRAM
#                                      (the profiled child) with its spec's backends
#                                      turned into $FAKE_NCU_BACKEND (default cpu), since
#                                      the tests have no GPU
case "$1" in
    --version)
        echo "NVIDIA (R) Nsight Compute Command Line Profiler"
        echo "Version 2099.1.0.0 (build 0) (fake)"
        exit 0 ;;
    --import)
        cat "$2"
        exit 0 ;;
esac
report=""
while [ $# -gt 0 ]; do
    case "$1" in
        --export) report="$2"; shift 2 ;;
        --metrics|--clock-control|--cache-control|--target-processes) shift 2 ;;
        --force-overwrite) shift ;;
        *) break ;;
    esac
done
cp "$FAKE_NCU_CSV" "$report"
spec="${!#}"
"$1" -c 'import json, sys
path, backend = sys.argv[1], sys.argv[2]
spec = json.load(open(path))
spec["targets"] = [backend for _ in spec["targets"]]
json.dump(spec, open(path, "w"))' "$spec" "${FAKE_NCU_BACKEND:-cpu}"
exec "$@"
