#!/usr/bin/env bash
# Every experiment of the source documents, one preset each, then one report over them all.
#
#   scripts/gpu_presets.sh OUT_DIR [PRESET ...]     (default: assignment lab chapter blog)
#
# Each preset goes to OUT_DIR/<preset>/ (results, figures, its own report); the combined
# report is OUT_DIR/report.html and OUT_DIR/report.md. Environment overrides, used by
# the smoke test on CPU-only machines: BACKENDS (cuda,opencl,cpu), EXTRA_ARGS (appended
# to every compare, e.g. "--sizes 16x16").
set -uo pipefail

out=${1:?usage: scripts/gpu_presets.sh OUT_DIR [PRESET ...]}
shift
presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(assignment lab chapter blog)
mkdir -p "$out"
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

failed=0
folders=()
for preset in "${presets[@]}"; do
    # shellcheck disable=SC2086  # EXTRA_ARGS is a list of options on purpose
    python3 -m xbackend compare --preset "$preset" --backends "${BACKENDS:-cuda,opencl,cpu}" \
        --out "$out/$preset" ${EXTRA_ARGS:-} > "$out/$preset.txt" 2>&1 || failed=1
    echo "$preset: $(grep "^code equality:" "$out/$preset.txt" || echo "no summary, see $out/$preset.txt")"
    folders+=("$out/$preset")
done
python3 -m xbackend report "${folders[@]}" --out "$out" || failed=1
exit $failed
