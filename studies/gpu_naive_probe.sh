#!/usr/bin/env bash
# Why NVIDIA's OpenCL ran the shipped naive kernel 1.2x slower than CUDA's while a
# student's naive kernel ran as fast (docs/notebook/measurement.md, "One device clock"): the
# shipped kernel, the student's, and copies of the shipped one that each drop one thing
# (studies/naive_probe/), timed on the device clock at the assignment's largest size and
# at 2048³, three runs one after the other.
#
#   OUT=/tmp/out bash studies/gpu_naive_probe.sh
set -u
out=${OUT:?set OUT}
cd "$(dirname "$0")/.."
probes=probe_same,probe_no_reqd,probe_no_restrict,probe_no_batch,probe_global_id,probe_batch_int,probe_batch_after
for run in 1 2 3; do
    timeout 150 python3 -m xbackend compare --backends cuda,opencl:nvidia \
        --kernels studies/naive_probe --kernels examples/assignment/student \
        --variants naive,student_naive,$probes --sizes 608x532,2048x2048x2048 \
        --out "$out/probe$run" -q --no-plots > "$out/probe$run.txt" 2>&1
    echo "run $run: exit $?"
done
python3 - "$out" <<'PY'
import statistics, sys
from pathlib import Path
from xbackend.results import load
points = load(sorted(Path(sys.argv[1]).glob("probe*/"))).points
lines = {}
for p in points:
    if p.status == "ok":
        lines.setdefault((p.M, p.label, p.variant, p.clock), []).append(p.kernel_median_s)
for (m, label, variant, clock), medians in sorted(lines.items()):
    print(f"{m:5d} {label:14s} {variant:18s} {clock:12s} "
          + " ".join(f"{s * 1e6:8.1f}" for s in medians) + " us")
PY
