#!/usr/bin/env bash
# The evidence of docs/notebook/measurement.md, on a GPU machine (CUDA and NVIDIA OpenCL):
#  1. an A/A test: the default schedule twice, `xbackend diff` between them;
#  2. an A/B test: the same plan from a copy of the tree whose CUDA mm_tiled walks one
#     extra tile of zeros in ten along K (at least one; the result is unchanged, the
#     kernel slower), `diff --fail-on slower` against the first run;
#  3. the cache modes: warm, cold and hot at 256-4096 for naive, tiled, warp_db, vendor;
#  4. how the points stopped (noise, stable, timeout, max-samples) in every run above.
# usage: studies/gpu_trust.sh OUT   (from the repository root, xbackend importable)
set -uo pipefail
OUT=${1:?usage: studies/gpu_trust.sh OUT}
mkdir -p "$OUT"
X="python3 -m xbackend"
run() { echo "+ $*" >&2; "$@"; }

run $X compare --backends cuda,opencl --out "$OUT/a1" -q --no-plots | tail -9
run $X compare --backends cuda,opencl --out "$OUT/a2" -q --no-plots | tail -3

slow=$(mktemp -d)
cp -r xbackend kernels "$slow"/
sed -i 's|for (int k0 = 0; k0 < K; k0 += TILE) {|for (int k0 = 0; k0 < K + TILE * ((K / TILE + 9) / 10); k0 += TILE) {|' \
    "$slow/kernels/mm/mm.cu"
echo "slowed loops: $(grep -c 'K + TILE \* ((K / TILE + 9) / 10)' "$slow/kernels/mm/mm.cu")"
(cd "$slow" && PYTHONPATH="$slow:${PYTHONPATH:-}" run $X compare --backends cuda,opencl \
    --out "$OUT/b" -q --no-plots | tail -3)

run $X diff "$OUT/a1" "$OUT/a2" --fail-on changed --out "$OUT/diff-aa" | tail -4
echo "A/A exit status (0 expected): ${PIPESTATUS[0]}"
run $X diff "$OUT/a1" "$OUT/b" --fail-on slower --out "$OUT/diff-ab" | tail -4
echo "A/B exit status (1 expected): ${PIPESTATUS[0]}"

sizes=256x256,512x512,1024x1024,2048x2048,4096x4096
# A cold sample is one launch; warm and hot time short kernels as batches by default,
# and as single launches with --short-kernel 0 (the "-1" runs), to tell the two apart.
for cache in warm cold hot warm-1 hot-1; do
    single=(); [[ $cache == *-1 ]] && single=(--short-kernel 0)
    run $X compare --backends cuda,opencl --sizes $sizes --variants naive,tiled,warp_db,vendor \
        --cache "${cache%-1}" "${single[@]}" --out "$OUT/cache-$cache" -q --no-plots | tail -2
done
python3 studies/sampling_report.py "$OUT"/a1 "$OUT"/a2 "$OUT"/b "$OUT"/cache-*
python3 studies/sampling_report.py --cache "$OUT"/cache-warm-1 "$OUT"/cache-cold "$OUT"/cache-hot-1
python3 studies/sampling_report.py --cache "$OUT"/cache-warm "$OUT"/cache-warm-1 "$OUT"/cache-hot
