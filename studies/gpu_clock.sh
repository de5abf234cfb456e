#!/usr/bin/env bash
# One device clock (docs/notebook/measurement.md), on one NVIDIA GPU machine:
#   1. studies/clock_study.py: span, API time, overhead, gap and stamping's cost for
#      naive, tiled and the top rungs in CUDA and NVIDIA's OpenCL;
#   2. the same CUDA launches timed by Nsight Compute (gpu__time_duration, clocks left
#      alone, caches left alone) beside their spans, launch for launch;
#   3. the default compare (cuda, opencl) by the API's clock (XBACKEND_CLOCK=api, as
#      before the stamps) and by the stamps, one after the other.
#
#   OUT=/tmp/out bash studies/gpu_clock.sh        (STEPS="study ncu compare" by default)
#
# Needs CUDA (PyCUDA) and NVIDIA's OpenCL registered (scripts/gpu_proof.sh says how).
set -u
out=${OUT:?set OUT}
cd "$(dirname "$0")/.."
steps=${STEPS:-study ncu compare}
[[ $steps == *study* ]] && timeout "${STUDY_LIMIT:-300}" python3 studies/clock_study.py \
    --out "$out" 2>&1 | tee "$out/clock_study.txt"
if [[ $steps == *ncu* ]]; then
    timeout 200 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum \
        --kernel-name regex:'^(mm_|rmm_)' --csv --log-file "$out/ncu.csv" \
        python3 studies/clock_study.py --ncu --variants naive,tiled,warp_db \
        --sizes 1024,2048,4096 > "$out/ncu_spans.txt" 2>&1
    echo "ncu: exit $?"
fi
if [[ $steps == *compare* ]]; then
    XBACKEND_CLOCK=api timeout 120 python3 -m xbackend compare --backends cuda,opencl \
        --out "$out/before" > "$out/compare_before.txt" 2>&1
    timeout 120 python3 -m xbackend compare --backends cuda,opencl \
        --out "$out/after" > "$out/compare_after.txt" 2>&1
    tail -3 "$out/compare_before.txt" "$out/compare_after.txt"
    tar czf "$out/compare.tgz" -C "$out" before after && rm -rf "$out/before" "$out/after"
fi
