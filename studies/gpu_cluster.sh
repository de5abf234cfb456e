#!/usr/bin/env bash
# The cluster on one host with several GPUs (docs/cluster.md):
#   1. the default schedule with every variant, CUDA and OpenCL: serial, one GPU's worker
#      (--gpus 0), every GPU (--gpus all), twice in that order; diff of a one-GPU run and
#      an all-GPU run;
#   2. a plan of millisecond points (squares 1024 to 4096, every variant): serial, then
#      every GPU;
#   3. (STEP=host) what slows a worker's points: the default schedule on one GPU's worker
#      and serially, as they are, with OpenBLAS's idle threads asleep at once
#      (OPENBLAS_THREAD_TIMEOUT=4) and with Dask's profiler off;
#   4. (STEP=big) the default schedule serially (the kernels built), on one GPU's worker
#      twice and on every GPU; then the plan of millisecond points, serial then every
#      GPU, ROUNDS times (default 2); all side by side;
#   5. (STEP=ms) the plan of millisecond points alone, serial then every GPU, ROUNDS times
#      (default 2), with the full check and then with --check freivalds (CHECKS names
#      which); MS_STEPS squares from 1024 (default 4: to 4096);
#   6. (STEP=tune) tune of two block-tile variants at the default sizes: shared among the
#      GPUs, then serially on GPU 0, each into its own cache (the shared one first: the
#      serial tune finds the kernels compiled), and the two caches compared.
# Each run's wall time (the command, start to exit) is printed; the records' timestamps
# give first point to last.
#
#   OUT=/tmp/out [STEP=compare|host|big|ms|tune] bash studies/gpu_cluster.sh
#
# Needs CUDA (PyCUDA), NVIDIA's OpenCL registered and Dask (scripts/gpu_proof.sh says how).
set -u
out=${OUT:?set OUT}
cd "$(dirname "$0")/.."
export CUDA_DEVICE_ORDER=PCI_BUS_ID
X="python3 -m xbackend"
every=(--backends cuda,opencl --variants all --no-plots)

timed() {  # NAME COMMAND...: run it, its output in $out/NAME.txt, and say how long it took
    local name=$1 start end
    shift
    start=$(date +%s.%N)
    "$@" > "$out/$name.txt" 2>&1
    local status=$?
    end=$(date +%s.%N)
    printf '%-14s exit %d  %6.1f s  %s\n' "$name" "$status" "$(python3 -c "print($end - $start)")" \
        "$(grep -h "^code equality\|cluster:" "$out/$name.txt" | tr '\n' ' ')"
}

if [ "${STEP:-compare}" = compare ]; then
    for round in 1 2; do
        timed "serial$round" $X compare "${every[@]}" --out "$out/serial$round"
        timed "one$round" $X compare "${every[@]}" --gpus 0 --out "$out/one$round"
        timed "all$round" $X compare "${every[@]}" --gpus all --out "$out/all$round"
    done
    $X diff "$out/one1" "$out/all1" --out "$out/diff_one_all" > "$out/diff_one_all.txt" 2>&1
    tail -12 "$out/diff_one_all.txt"
    $X diff "$out/one1" "$out/one2" --out "$out/diff_one_one" > "$out/diff_one_one.txt" 2>&1
    tail -12 "$out/diff_one_one.txt"
    big=(--backends cuda,opencl --variants all --base 1024x1024 --steps 4 --no-plots)
    timed big_serial $X compare "${big[@]}" --out "$out/big_serial"
    timed big_all $X compare "${big[@]}" --gpus all --out "$out/big_all"
fi
if [ "${STEP:-compare}" = host ]; then
    quiet=(OPENBLAS_THREAD_TIMEOUT=4)
    noprofile=(DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED=False)
    timed h_serial $X compare "${every[@]}" --out "$out/h_serial"
    timed h_serial_quiet env "${quiet[@]}" $X compare "${every[@]}" --out "$out/h_serial_quiet"
    timed h_one $X compare "${every[@]}" --gpus 0 --out "$out/h_one"
    timed h_one_quiet env "${quiet[@]}" $X compare "${every[@]}" --gpus 0 --out "$out/h_one_quiet"
    timed h_one_noprofile env "${noprofile[@]}" $X compare "${every[@]}" --gpus 0 \
        --out "$out/h_one_noprofile"
    timed h_all_quiet env "${quiet[@]}" $X compare "${every[@]}" --gpus all --out "$out/h_all_quiet"
    python3 scripts/cluster_timeline.py "$out"/h_*/
fi
if [ "${STEP:-compare}" = big ]; then
    big=(--backends cuda,opencl --variants all --base 1024x1024 --steps 4 --no-plots)
    timed d_serial $X compare "${every[@]}" --out "$out/d_serial"  # the kernels built once
    timed d_one $X compare "${every[@]}" --gpus 0 --out "$out/d_one"
    timed d_one_again $X compare "${every[@]}" --gpus 0 --out "$out/d_one_again"
    timed d_all $X compare "${every[@]}" --gpus all --out "$out/d_all"
    for round in $(seq 1 "${ROUNDS:-2}"); do
        timed "b_serial$round" $X compare "${big[@]}" --out "$out/b_serial$round"
        timed "b_all$round" $X compare "${big[@]}" --gpus all --out "$out/b_all$round"
    done
    python3 scripts/cluster_timeline.py "$out"/b_*/ "$out"/d_*/
    $X diff "$out/d_one" "$out/d_all" > "$out/d_diff.txt" 2>&1
    tail -1 "$out/d_diff.txt" | head -1; grep "^verdicts" "$out/d_diff.txt"
fi
if [ "${STEP:-compare}" = ms ]; then
    big=(--backends cuda,opencl --variants all --base 1024x1024 --steps "${MS_STEPS:-4}" --no-plots)
    for check in ${CHECKS:-full freivalds}; do
        for round in $(seq 1 "${ROUNDS:-2}"); do
            timed "m_${check}_serial$round" $X compare "${big[@]}" --check "$check" \
                --out "$out/m_${check}_serial$round"
            timed "m_${check}_all$round" $X compare "${big[@]}" --check "$check" --gpus all \
                --out "$out/m_${check}_all$round"
        done
    done
    python3 scripts/cluster_timeline.py "$out"/m_*/
fi
if [ "${STEP:-compare}" = tune ]; then
    tune=(tune --backends cuda --variants "${VARIANTS:-warp_db,vec4}" --op mm)
    timed tune_shared env XBACKEND_TUNE_CACHE="$out/shared.json" $X "${tune[@]}" --gpus all
    timed tune_serial env XBACKEND_TUNE_CACHE="$out/serial.json" CUDA_VISIBLE_DEVICES=0 $X "${tune[@]}"
    python3 scripts/tune_agreement.py "$out/serial.json" "$out/shared.json"
fi
