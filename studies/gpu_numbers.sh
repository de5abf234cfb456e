#!/usr/bin/env bash
# Issue 37's numbers on a GPU machine, written under OUT as they come:
#  1. end-to-end one product: naive at four sizes on cuda, opencl and the CPU's vendor line,
#     from the tree before the fix (BEFORE=path holding xbackend/ and kernels/) and now, and
#     now with one launch a sample (--short-kernel 0), side by side;
#  2. the default compare of cuda,opencl,cpu (its report's findings are quoted in the docs);
#  3. with STUDY=1, the CPU lines' study (studies/cpu_settle.py) on this idle host.
# usage: BEFORE=.old studies/gpu_numbers.sh OUT   (from the repository root, xbackend importable)
set -uo pipefail
OUT=${1:?usage: studies/gpu_numbers.sh OUT}
mkdir -p "$OUT"
X="python3 -m xbackend"
sizes=16x14,64x56,256x224,608x532
e2e() {  # NAME TREE [options]
    local name=$1 tree=$2; shift 2
    (cd "$tree" && PYTHONPATH="$PWD:${PYTHONPATH:-}" python3 -m xbackend compare \
        --backends cuda,opencl,cpu --variants naive,vendor --sizes $sizes "$@" \
        --out "$OUT/e2e-$name" -q --no-plots | tail -2)
}
if [ -n "${BEFORE:-}" ]; then e2e before "$BEFORE"; fi
e2e after .
e2e single . --short-kernel 0
python3 studies/end_to_end_table.py ${BEFORE:+before="$OUT/e2e-before"} after="$OUT/e2e-after" \
    single="$OUT/e2e-single" | tee "$OUT/e2e.md"
uptime
$X compare --backends cuda,opencl,cpu --out "$OUT/default" -q | tail -14
python3 studies/sampling_report.py "$OUT/default" | tee "$OUT/default-sampling.txt"
if [ -n "${STUDY:-}" ]; then python3 studies/cpu_settle.py "$OUT/settle" | tee "$OUT/settle.txt"; fi
