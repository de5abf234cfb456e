#!/usr/bin/env bash
# Do mm_warp's builds without ASYNC read the same after a kernel change? (issue 43; a record)
#
#   bash studies/preprocess_same.sh REV      # REV: the commit whose kernel files came before
#
# Each option set below is preprocessed (gcc -E -P: the #if/#ifdef and the macros, as the
# CUDA and OpenCL front ends would) from the files at REV and from the working tree; where
# the texts are equal the compilers get the same input, and a tuned choice of that build
# carries over to the new kernel's digest. An ASYNC build is preprocessed too: it must
# differ, or the check could not fail. Used on 2026-11-27 to keep the database's entries of
# vec4, vec4_db, warp and warp_db when KEEP_ADDRESS changed only the ASYNC copies
# (docs/notebook/performance.md, "The slab address, made once").
set -u
rev=${1:?name the commit before the change}
cd "$(dirname "$0")/.."
before=$(mktemp -d)
trap 'rm -rf "$before"' EXIT
preprocess() {  # preprocess FILE LANGUAGE OPTIONS...: the text's digest
    local file=$1 lang=$2
    shift 2
    if [ "$lang" = cu ]; then set -- -D__CUDA_ARCH__=900 -I kernels/cuda "$@"
    else set -- -DXB_PTX=90 -I kernels/opencl "$@"; fi
    gcc -E -P -x c -I kernels/mm_warp "$@" "$file" | sha256sum
}
total=0 same=0
for lang in cu cl; do
    git show "$rev:kernels/mm_warp/mm_warp.$lang" >"$before/mm_warp.$lang" || exit 2
    for layout in "" "-DWM=32 -DWN=64" "-DWM=64 -DWN=64"; do
    for switches in "" "-DDOUBLE_BUFFER" "-DDOUBLE_BUFFER -DDYNAMIC_SHARED"; do
        [ "$lang" = cl ] && [[ $switches == *DYNAMIC* ]] && continue  # CUDA's only
    for vector in "-DVEC4 -DLOCAL4" ""; do
    for real in float double; do
    for extra in "" -DSTAMP -DWIDE_INDEX -DREDUCED; do
        options="-DBM=128 -DBN=128 -DBK=8 -DTM=8 -DTN=8 $layout $switches $vector -DREAL=$real -DPAD=4 -DSUM_BLOCK=256 $extra"
        # shellcheck disable=SC2086  # the options are words
        a=$(preprocess "$before/mm_warp.$lang" "$lang" $options)
        # shellcheck disable=SC2086
        b=$(preprocess "kernels/mm_warp/mm_warp.$lang" "$lang" $options)
        total=$((total + 1))
        if [ "$a" = "$b" ]; then same=$((same + 1)); else echo "differs: $lang $options"; fi
    done; done; done; done; done
    options="-DBM=128 -DBN=128 -DBK=8 -DTM=8 -DTN=8 -DWM=64 -DWN=64 -DASYNC -DSTAGES=3 -DVEC4 -DLOCAL4 -DREAL=float -DPAD=4 -DSUM_BLOCK=256"
    # shellcheck disable=SC2086
    if [ "$(preprocess "$before/mm_warp.$lang" "$lang" $options)" = \
         "$(preprocess "kernels/mm_warp/mm_warp.$lang" "$lang" $options)" ]; then
        echo "an ASYNC build ($lang) reads the same: the check cannot tell"
    else
        echo "an ASYNC build ($lang) differs, as it must"
    fi
done
echo "builds without ASYNC: $same of $total preprocess to the same text as at $rev"
