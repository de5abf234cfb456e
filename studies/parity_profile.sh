#!/usr/bin/env bash
# What stands between the best rung and cuBLAS, under Nsight Compute (docs/notebook/performance.md,
# "Toward parity"): the tuned warp_db kernel (and the other rungs VARIANTS names: default
# "warp_db vendor") and cuBLAS's SGEMM at 4096³, one launch each,
# with the sections that say where the time goes (throughput, occupancy, the issue slots,
# the warps' stalls, shared memory). Clocks are not locked (--clock-control none), so the
# durations compare with the event times of the ladder.
#
#   OUT=/tmp/out bash studies/parity_profile.sh        (on a GPU machine, PyCUDA installed)
#   VARIANTS="warp_db warp_async vendor" OUT=/tmp/out bash studies/parity_profile.sh
set -u
out=${OUT:?set OUT}/parity
mkdir -p "$out"
cd "$(dirname "$0")/.."
ncu=${NCU:-/usr/local/cuda/bin/ncu}
cat >"$out/products.py" <<'EOF'
import sys
import xbackend
from xbackend.problems import Shape, make_operands

backend = xbackend.get_backend("cuda")
A, B = make_operands(Shape(4096, 4096, 4096), seed=7)
for variant in sys.argv[1:]:
    measured = backend.measure(A, B, variant, warmup=0, samples=1, min_samples=1)
    print(variant, measured.params, flush=True)
EOF
for variant in ${VARIANTS:-warp_db vendor}; do
    timeout 240 "$ncu" --clock-control none --target-processes all \
        -k 'regex:mm_warp|gemm|Kernel' --launch-skip 1 --launch-count 1 \
        --section SpeedOfLight --section Occupancy --section LaunchStats \
        --section ComputeWorkloadAnalysis --section SchedulerStats --section WarpStateStats \
        --section MemoryWorkloadAnalysis --section InstructionStats \
        python3 "$out/products.py" "$variant" >"$out/ncu_$variant.txt" 2>&1
    echo "$variant: exit $?"
done
