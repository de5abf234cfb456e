#!/usr/bin/env bash
# Fair defaults on one GPU machine (docs/notebook/performance.md, "Untuned and tuned"):
#   1. the device's registers, as CUDA and NVIDIA's OpenCL say them;
#   2. xbackend tune (the coarse search) on CUDA, then on NVIDIA's OpenCL, each timed,
#      each into a cache of its own;
#   3. the tuning database made from those caches (scripts/tuning_db.py);
#   4. where a reference tune cache is named (REFERENCE=file: an exhaustive tune of this
#      machine), each coarse choice raced against its choice (studies/tuner_check.py);
#   5. the ladder's tuned variants untuned (no cache, no database: the derived default)
#      and tuned (the new database), side by side in one run, against cuBLAS.
#
#   OUT=/tmp/out bash studies/gpu_fair.sh MACHINE     (MACHINE: "H100", "H200", ...)
#   STEPS=tune ...      only steps 1-4;   STEPS=ladder ...   only step 5, with the
#                       database named by DB (default: the shipped one)
#   BACKENDS=cuda ...   tune only these (default "cuda opencl:nvidia"; one call each
#                       keeps each under a 10-minute limit: scripts/tuning_db.py then
#                       takes the caches of both)
#
# Needs CUDA (PyCUDA) and NVIDIA's OpenCL registered; every step has a time limit, so a
# slow one leaves the others their time. Everything lands in $OUT/fair/.
set -u
machine=${1:?name the machine, e.g. H100}
out=${OUT:?set OUT}/fair
mkdir -p "$out"
cd "$(dirname "$0")/.."
run() {  # run LIMIT LOG COMMAND...: time a step, its output into LOG
    local limit=$1 log=$2
    shift 2
    local began=$(date +%s)
    timeout "$limit" "$@" >"$log" 2>&1
    local status=$?
    echo "$(basename "$log"): exit $status in $(( $(date +%s) - began )) s" | tee -a "$out/steps.txt"
}

python3 - >"$out/registers.txt" 2>&1 <<'EOF'
import xbackend
for name in ("cuda", "opencl:nvidia"):
    device = xbackend.get_backend(*name.split(":")).device
    print(f"{name}: {device.name}: registers {device.registers}, "
          f"units {device.compute_units}, shared {device.local_mem_bytes}")
EOF
cat "$out/registers.txt"

steps=${STEPS:-tune ladder}
[[ $steps == *tune* ]] && for backend in ${BACKENDS:-cuda opencl:nvidia}; do
    tag=${backend%%:*}
    XBACKEND_TUNE_CACHE=$out/tune_$tag.json XBACKEND_TUNING_DB=off \
        run "${TUNE_LIMIT:-240}" "$out/tune_$tag.txt" python3 -m xbackend tune --backends "$backend"
done

if [[ $steps == *tune* ]]; then
    python3 scripts/tuning_db.py "$out"/tune_*.json --db "$out/tuning_db.json" \
        --how "xbackend tune --backends cuda|opencl:nvidia, $machine machine, $(date -u +%F)" \
        >"$out/tuning_db.txt" 2>&1
    db=$out/tuning_db.json
    if [ -n "${REFERENCE:-}" ]; then
        for backend in cuda opencl:nvidia; do
            tag=${backend%%:*}
            run 120 "$out/check_$tag.txt" python3 studies/tuner_check.py --backend "$backend" \
                "$out/tune_$tag.json" "$REFERENCE"
        done
    fi
fi
[[ $steps == *ladder* ]] && XBACKEND_TUNE_CACHE=$out/no_cache.json \
    XBACKEND_TUNING_DB=${DB:-${db:-$PWD/xbackend/tuning/tuning_db.json}} \
    run "${LADDER_LIMIT:-240}" "$out/ladder.txt" python3 scripts/ladder_benchmark.py --untuned \
    --sizes "${SIZES:-4096x4096x4096,8000x7000x8000,1000x3001x1000}" --rounds 3 \
    --variants vec4,vec4_db,warp,warp_db,warp_async --rmm-variants vec4_db,warp_db
cat "$out/steps.txt"
