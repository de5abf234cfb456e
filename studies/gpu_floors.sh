#!/usr/bin/env bash
# Issue 37/38's A/A evidence on a GPU machine, written under OUT as it comes: the default
# compare twice, diff between them by the threshold alone (writing the floors that pair
# shows, keyed by device) and through the shipped floors; then the CPU's lines alone, for
# their noisy share and time.
# usage: studies/gpu_floors.sh OUT   (from the repository root, xbackend importable)
set -uo pipefail
OUT=${1:?usage: studies/gpu_floors.sh OUT}
mkdir -p "$OUT"
X="python3 -m xbackend"
for run in a1 a2; do
    start=$(date +%s)
    $X compare --backends cuda,opencl,cpu --out "$OUT/$run" -q --no-plots | tail -5
    echo "$run: $(( $(date +%s) - start )) s"
done
$X diff "$OUT/a1" "$OUT/a2" --floors none --write-floors "$OUT/floors.json" --no-plots \
    --out "$OUT/d-none" | tail -3
$X diff "$OUT/a1" "$OUT/a2" --out "$OUT/d-shipped" | tail -3
start=$(date +%s)
$X compare --backends cpu --out "$OUT/cpu" -q --no-plots | tail -6
echo "cpu: $(( $(date +%s) - start )) s"
python3 studies/sampling_report.py "$OUT/a1" "$OUT/a2" "$OUT/cpu" > "$OUT/sampling.txt"
