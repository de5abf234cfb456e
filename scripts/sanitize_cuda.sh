#!/usr/bin/env bash
# Every CUDA kernel, every variant and tile, under each compute-sanitizer tool; then the
# deliberately broken kernels of tests/kernels/, which must be caught.
#
#   scripts/sanitize_cuda.sh OUT_DIR
#
# Prints one verdict line per run and writes each tool's full output to OUT_DIR.
# Exits 1 if a clean run reports anything or a broken kernel goes unnoticed.
# SANITIZER and PROBE_BACKEND replace compute-sanitizer and cuda (for the smoke test).
set -uo pipefail

out=${1:?usage: scripts/sanitize_cuda.sh OUT_DIR}
mkdir -p "$out"
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
sanitizer=${SANITIZER:-compute-sanitizer}
failed=0

sanitize() {  # NAME TOOL [ENV=VALUE ...] -- PROBE ARGS
    local name=$1 tool=$2; shift 2
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
    # Padding after every allocation turns an out-of-bounds read of a neighbour into a report.
    env "${envs[@]}" "$sanitizer" --tool "$tool" --padding 4096 --error-exitcode 9 \
        python3 scripts/kernel_probe.py --backend "${PROBE_BACKEND:-cuda}" "$@" > "$out/$name.txt" 2>&1
}

for tool in memcheck racecheck synccheck initcheck; do
    sanitize "clean-$tool" "$tool" -- ; rc=$?
    summary=$(grep -m1 -E "ERROR SUMMARY|RACECHECK SUMMARY" "$out/clean-$tool.txt")
    passes=$(grep -c '^PASS' "$out/clean-$tool.txt")
    if [ $rc -eq 0 ]; then verdict=clean; else verdict=REPORTED; failed=1; fi
    echo "$tool: $verdict, $passes cases passed ($summary)"
done

for case in "missing_barrier racecheck" "unguarded_load memcheck"; do
    set -- $case
    sanitize "broken-$1-$2" "$2" "XBACKEND_KERNELS=tests/kernels/$1" -- \
        --ops mm,bmm --sizes 9x20x11 --tiles 8
    rc=$?
    summary=$(grep -m1 -E "ERROR SUMMARY|RACECHECK SUMMARY" "$out/broken-$1-$2.txt")
    if [ $rc -eq 9 ]; then verdict=caught; else verdict="NOT CAUGHT (exit $rc)"; failed=1; fi
    echo "$1 under $2: $verdict ($summary)"
done
exit $failed
