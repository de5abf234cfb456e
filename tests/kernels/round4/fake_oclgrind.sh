#!/usr/bin/env bash
# Stands in for oclgrind in tests/test_check_faults.py, failing as FAKE_OCLGRIND says:
# "sleep" never ends, "crash" dies of a signal before any verdict, "cap" runs the
# program (without checking anything) and then says oclgrind's cap on reports was reached;
# "linger" waits on a process of its own (sleep 601), which must not outlive its deadline.
# It says no version: its runs are never keyed in a file of verdicts (grading/sanitized.py).
[ "${1:-}" = --version ] && exit 1
while [ $# -gt 0 ] && [ "${1#--}" != "$1" ]; do  # oclgrind's own options
    case "$1" in --max-errors|--log|--num-threads) shift ;; esac  # and their values
    shift
done
case "$FAKE_OCLGRIND" in
    sleep) exec sleep 600 ;;
    linger) sleep 601 & wait ;;
    crash) echo "oclgrind: simulated internal error" >&2; kill -SEGV $$ ;;
    cap) "$@"; echo "Oclgrind: 1000 errors generated - suppressing further errors" >&2 ;;
esac
