#!/usr/bin/env bash
# Your own kernels and verdicts between runs, on one NVIDIA GPU machine (docs/notebook/kernels.md,
# docs/notebook/measurement.md):
#   1. xbackend check of examples/assignment (a student's kernels and one with an edge
#      bug) in CUDA and NVIDIA's OpenCL;
#   2. the default compare with the student's kernels beside the shipped ones, on the
#      device clock (figures and report kept);
#   3. the default compare (cuda, opencl) three times, then once with CUDA's tiled kernel
#      slowed (it loops over 10% more tiles of K, of zeros), and diff of each pair.
#
#   OUT=/tmp/out bash studies/gpu_families.sh
#
# Needs CUDA (PyCUDA) and NVIDIA's OpenCL registered (scripts/gpu_proof.sh says how).
set -u
out=${OUT:?set OUT}
cd "$(dirname "$0")/.."
X="python3 -m xbackend"
gpus=cuda,opencl:nvidia
timeout 200 $X check examples/assignment/student examples/assignment/edge_bug \
    --backends $gpus --out "$out/check" > "$out/check.txt" 2>&1
echo "check: exit $?"; tail -16 "$out/check.txt"
timeout 200 $X compare --backends $gpus --kernels examples/assignment/student \
    --out "$out/student" > "$out/student.txt" 2>&1
echo "compare with the student's kernels: exit $?"; tail -22 "$out/student.txt"
for run in a1 a2 a3; do
    timeout 100 $X compare --backends $gpus --out "$out/$run" -q --no-plots | tail -1
done
slow=$(mktemp -d)
cp -r xbackend kernels "$slow"/
sed -i 's|for (int k0 = 0; k0 < K; k0 += TILE) {|for (int k0 = 0; k0 < K + TILE * ((K / TILE + 9) / 10); k0 += TILE) {|' \
    "$slow/kernels/mm/mm.cu"
echo "slowed loops: $(grep -c 'K + TILE \* ((K / TILE + 9) / 10)' "$slow/kernels/mm/mm.cu")"
(cd "$slow" && PYTHONPATH="$slow:${PYTHONPATH:-}" timeout 100 $X compare --backends $gpus \
    --out "$out/b" -q --no-plots | tail -1)
for pair in "a1 a2" "a2 a3" "a1 a3" "a1 b" "a2 b" "a3 b"; do
    set -- $pair
    echo "== diff $1 $2"
    $X diff "$out/$1" "$out/$2" --no-plots --out "$out/diff-$1-$2" > "$out/diff-$1-$2.txt" 2>&1
    grep -E "FASTER|SLOWER|SAME|UNCERTAIN" "$out/diff-$1-$2.txt" | tail -3
    grep -E "SLOWER|FASTER" "$out/diff-$1-$2.txt" | grep -v "^[0-9]* " | head -12
done
