#!/usr/bin/env bash
# The CPU A/A pairs and the planted A/B pair of docs/diff.md (issue 53), on the 2-core
# machine: two identical default compare runs (--steps STEPS) while another job keeps 0, 1
# and 2 cores busy in turn (studies/cpu_load_cycle.py), then without it; then the planted
# kernel (studies/planted) against its slower twin. Each run's load is written beside it.
# Usage: studies/cpu_aa.sh OUT [STEPS] [PAIRS]
set -u
OUT=${1:?an output folder}
STEPS=${2:-16}
PAIRS=${3:-2}
mkdir -p "$OUT"
say() { echo "$1 $(date +%T) $(cut -d' ' -f1-3 /proc/loadavg) $(head -1 /proc/pressure/cpu)"; }
run() {  # name, then compare's arguments
    say "$1 start"
    python -m xbackend compare --steps "$STEPS" --out "$OUT/$1" -q "${@:2}" > "$OUT/$1.log" 2>&1
    say "$1 end (exit $?)"
}
diffed() {  # name
    python -m xbackend diff "$OUT/$1_a" "$OUT/$1_b" --fail-on changed --no-plots \
        --out "$OUT/$1_diff" > "$OUT/$1_diff.log" 2>&1
    echo "$1 diff exit $?: $(grep -m1 '^verdicts' "$OUT/$1_diff.log")"
}
for i in $(seq "$PAIRS"); do
    python studies/cpu_load_cycle.py 900 & load=$!
    run "cycle$i"_a; run "cycle$i"_b
    kill "$load"; wait "$load" 2>/dev/null
    diffed "cycle$i"
done
for i in $(seq "$PAIRS"); do
    run "plain$i"_a; run "plain$i"_b; diffed "plain$i"
done
slower=$(mktemp -d)
cp -r studies/planted/. "$slower"
sed -i 's/SLOWER = "0"/SLOWER = "1"/' "$slower/family.toml"
run planted_a --backends opencl --kernels studies/planted
run planted_b --backends opencl --kernels "$slower"
diffed planted
rm -r "$slower"
