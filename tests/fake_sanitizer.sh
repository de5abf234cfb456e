#!/usr/bin/env bash
# Stands in for compute-sanitizer in the smoke test: drops its options, runs the program,
# and so catches nothing.
while [ $# -gt 0 ] && [ "$1" != python3 ]; do shift; done
exec "$@"
