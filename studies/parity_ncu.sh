#!/usr/bin/env bash
# cuBLAS's kernel, our rung in its shape (3 and 4 stages) and our best tuned rung, side by
# side under Nsight Compute at 4096³ on CUDA (issue 43; a record, not a tool): the sections
# that say where each spends its cycles. Clocks left alone (--clock-control none), as every
# other measurement.
#   bash studies/parity_ncu.sh OUT_DIR        # on a GPU machine, PYTHONPATH set
set -euo pipefail
out=${1:-parity_ncu}
mkdir -p "$out"
ncu --clock-control none --kernel-name regex:'gemm|mm_warp' --launch-count 8 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
    --section InstructionStats --section MemoryWorkloadAnalysis \
    --metrics smsp__sass_thread_inst_executed_op_ffma_pred_on.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,smsp__inst_executed.sum \
    python3 studies/parity_products.py > "$out/parity_ncu.txt" 2>&1
# Where each kernel's warps wait: every stall reason's cycles per issued instruction.
ncu --clock-control none --kernel-name regex:'gemm|mm_warp' --launch-count 8 \
    --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
    python3 studies/parity_products.py > "$out/parity_stalls.txt" 2>&1
