#!/usr/bin/env bash
# The ladder of two source trees, measured side by side: did a change keep the speed?
#
#   studies/ladder_parity.sh REFERENCE_TREE OUT_DIR [ROUNDS]
#
# REFERENCE_TREE is another checkout of xbackend (e.g. `git archive COMMIT | tar -x -C DIR`).
# Each round runs scripts/ladder_benchmark.py from the reference tree, then from this one,
# on the same GPU, so that clock and thermal drift fall on both alike; the logs go to
# OUT_DIR/reference-N.txt and OUT_DIR/current-N.txt. Options of the benchmark go in
# LADDER_ARGS (default: the top rungs at 4096³ and 1000×3001×1000). Tuned choices come from
# XBACKEND_TUNE_CACHE for the current tree and REFERENCE_TUNE_CACHE for the reference (the
# cache format may differ between the two).
set -euo pipefail

reference=$(cd "${1:?usage: studies/ladder_parity.sh REFERENCE_TREE OUT_DIR [ROUNDS]}" && pwd)
out=${2:?usage: studies/ladder_parity.sh REFERENCE_TREE OUT_DIR [ROUNDS]}
rounds=${3:-2}
args=${LADDER_ARGS:---variants vec4,vec4_db,warp,warp_db --sizes 4096x4096x4096,1000x3001x1000}
current=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"

run() {  # TREE CACHE LOG
    (cd "$1" && PYTHONPATH="$1${PYTHONPATH:+:$PYTHONPATH}" XBACKEND_TUNE_CACHE="$2" \
        python3 scripts/ladder_benchmark.py $args) >"$3" 2>&1 || echo "exit $? (see $3)"
}

for round in $(seq 1 "$rounds"); do
    run "$reference" "${REFERENCE_TUNE_CACHE:-}" "$out/reference-$round.txt"
    run "$current" "${XBACKEND_TUNE_CACHE:-}" "$out/current-$round.txt"
    echo "round $round done"
done
grep -h "of cuBLAS\|%" "$out"/current-*.txt | head -40 || true
