#!/usr/bin/env bash
# Issue 40 on a GPU: the kernels of examples/styles/ (each a style people bring: CUDA-only,
# OpenCL-only, a template, a struct argument, size_t sizes, a batch count, rectangular
# groups, outputs per worker, B transposed, column-major, a WIDTH define, two launches,
# SGEMM's scalars) through the commands, on CUDA and NVIDIA's OpenCL:
#   STEP=tests   the tests of the styles, the ABI, the families and the tuner (its
#                geometries: an element family's parameters, mm_warp's block tiles);
#   STEP=check   xbackend check of the folder (each family a submission, sanitizers on);
#   STEP=compare compare --kernels examples/styles, every variant, the default schedule's
#                first steps;
#   STEP=tune    tune of the families that declare a space, on each API.
#
#   OUT=/tmp/out STEP=tests|check|compare|tune bash studies/gpu_styles.sh
#
# Needs CUDA (PyCUDA) and NVIDIA's OpenCL registered (scripts/gpu_proof.sh says how).
set -u
out=${OUT:?set OUT}
cd "$(dirname "$0")/.."
X="python3 -m xbackend"
case "${STEP:-tests}" in
tests)
    python3 -m pytest -q -p no:cacheprovider -n 4 tests/test_styles.py tests/test_abi.py \
        tests/test_families.py tests/test_tune_search.py tests/test_tune_cache.py \
        tests/test_tune_hostile.py tests/test_tuning_db.py tests/test_warp_defaults.py 2>&1 | tail -25 | tee "$out/tests.log" ;;
check)
    $X check examples/styles --backends cuda,opencl --jobs 4 --kernel-timeout 30 \
        --out "$out/check" 2>&1 | tee "$out/check.log" ;;
compare)
    $X compare --backends cuda,opencl --kernels examples/styles --steps ${STEPS:-6} \
        --out "$out/compare" 2>&1 | tail -70 | tee "$out/compare.log" ;;
tune)
    for api in cuda opencl; do
        $X tune --backends $api --kernels examples/styles \
            --variants outputs_global,outputs_shared,rect_group_tiled,warp \
            --sizes 2048x2048x2048 --op mm --finalist-time 3 2>&1 \
            | grep -v "^  \[" | tee "$out/tune-$api.log"
    done ;;
esac
