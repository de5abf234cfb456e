#!/usr/bin/env bash
# The GPU proof run: the test suite with every backend required, then the comparison
# on the default (assignment) schedule and on one that reaches 4096×4096.
#
#   scripts/gpu_proof.sh OUT_DIR
#
# On a GPU machine without network: put the wheels of pyopencl, pytools, platformdirs,
# siphash24, mako and a built pycuda wheel into .whl/ first (docs/guide.md: "On a GPU machine").
# Environment overrides, used by the smoke test on CPU-only machines:
#   WHEELS (.whl; empty: install none)  BACKENDS (cuda,opencl,cpu)  REQUIRE (= BACKENDS names)  SKIP_TESTS (unset)
#   DEFAULT_STEPS (38)  LARGE_REFERENCE (4096x4096)  LARGE_BASE (256x256)  LARGE_STEPS (16)  LARGE_TILES (16,32)
set -euo pipefail

out=${1:?usage: scripts/gpu_proof.sh OUT_DIR}
backends=${BACKENDS:-cuda,opencl,cpu}
mkdir -p "$out"
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

wheels=${WHEELS-.whl}
if [ -n "$wheels" ] && compgen -G "$wheels/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/xbackend-site \
        "$wheels"/*.whl
    export PYTHONPATH="$PYTHONPATH:/tmp/xbackend-site"
fi
# NVIDIA ships its OpenCL library without registering it with the ICD loader on some images.
if [ -e /usr/lib/libnvidia-opencl.so.1 ] && [ -w /etc ] && ! grep -qs nvidia /etc/OpenCL/vendors/*.icd; then
    mkdir -p /etc/OpenCL/vendors
    echo /usr/lib/libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
fi

{
    date -u +"date: %Y-%m-%dT%H:%M:%SZ"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    python3 -m xbackend devices || true
} 2>&1 | tee "$out/devices.txt"

python3 studies/cublas_reference.py --sizes "${LARGE_REFERENCE:-4096x4096}" 2>&1 | tee "$out/cublas.txt"

tests_rc=0
if [ -z "${SKIP_TESTS:-}" ]; then
    # A failing test must not stop the comparison: both results are evidence.
    XBACKEND_REQUIRE=${REQUIRE:-$backends} python3 -m pytest -q -rs tests \
        2>&1 | tee "$out/tests.txt" || tests_rc=$?
fi

python3 -m xbackend compare --backends "$backends" --steps "${DEFAULT_STEPS:-38}" \
    --out "$out/default" 2>&1 | tee "$out/default.txt"
python3 -m xbackend compare --backends "$backends" \
    --base "${LARGE_BASE:-256x256}" --steps "${LARGE_STEPS:-16}" --tile "${LARGE_TILES:-16,32}" \
    --out "$out/large" 2>&1 | tee "$out/large.txt"
exit "$tests_rc"
