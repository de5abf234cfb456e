#!/usr/bin/env bash
# The whole test suite RUNS times in a row (default 20) from a fresh clone of HEAD, with a
# busy loop loading one core beside it, as issue 27's flake check asks (2-core machine):
#
#   studies/flake_check.sh OUT_DIR [RUNS]
#
# Each run's log is OUT_DIR/runN.log, and one line a run goes to OUT_DIR/summary.txt
# (exit status, seconds, pytest's last line). Both the suite and the loop run at nice 5,
# so an interactive shell stays usable. Started from a shell without job control (`&`,
# nohup) the commands inherit an ignored SIGINT: tests/conftest.py restores it.
# The clone gets a virtual environment of its own with the package installed as .ci/run
# installs it: an editable install of another checkout in the shell's Python would
# otherwise answer the tests' subprocesses (its import hook comes before PYTHONPATH).
set -u
out=${1:?usage: studies/flake_check.sh OUT_DIR [RUNS]}
runs=${2:-20}
mkdir -p "$out"
out=$(cd "$out" && pwd)
clone=$(mktemp -d)
git clone -q "$(cd "$(dirname "$0")/.." && pwd)" "$clone"
cd "$clone"
python3 -m venv .venv && .venv/bin/python -m pip install -q '.[test,cpu-opencl,clblast]' \
    > "$out/install.log" 2>&1 || { echo "install failed: $out/install.log"; exit 1; }
nice -n 5 python3 -c "while True: pass" &
load=$!
trap 'kill $load; rm -rf "$clone"' EXIT
for i in $(seq 1 "$runs"); do
    start=$(date +%s)
    XDG_CACHE_HOME="$out/cache$i" XBACKEND_REQUIRE=${XBACKEND_REQUIRE:-opencl,cpu,oclgrind,clblast} \
        nice -n 5 .venv/bin/python -m pytest -q -p no:cacheprovider > "$out/run$i.log" 2>&1
    status=$?
    echo "run $i of $(git log --oneline -1 | cut -c1-7): exit $status, $(( $(date +%s) - start )) s," \
        "$(tail -1 "$out/run$i.log")" >> "$out/summary.txt"
    rm -rf "$out/cache$i"
done
