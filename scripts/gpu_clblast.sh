#!/usr/bin/env bash
# CLBlast for the OpenCL vendor line on a machine with no apt and no network (the GPU
# machine): unpack the .deb files carried in .debs/, build pyclblast from the sdist in
# .sdist/ against them, install it into a folder of its own, and print what to export.
#
#   scripts/gpu_clblast.sh [PREFIX]        (default /tmp/clblast)
#
# Needs python3 with numpy, Cython and scikit-build-core, a C++ compiler, and cmake (or
# the cmake wheel in .sdist/). Environment overrides: DEBS (folder of .deb files), SDIST
# (folder with pyclblast-*.tar.gz), PYTHON (the interpreter to build for).
# Prepared on a machine with network by:
#   cd .debs && apt-get download libclblast1 libclblast-dev ocl-icd-libopencl1 \
#       ocl-icd-opencl-dev opencl-c-headers opencl-clhpp-headers
#   pip download --no-deps --no-binary=pyclblast -d .sdist pyclblast
#   pip download --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
#       --python-version 3.12 -d .sdist cmake ninja
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
prefix=${1:-/tmp/clblast}
debs=${DEBS:-$repo/.debs}
sdist_dir=${SDIST:-$repo/.sdist}
python=${PYTHON:-python3}

shopt -s nullglob
packages=("$debs"/*.deb)
sdists=("$sdist_dir"/pyclblast-*.tar.gz)
[ ${#packages[@]} -gt 0 ] || { echo "no .deb files in $debs (see this script's header)" >&2; exit 2; }
[ ${#sdists[@]} -gt 0 ] || { echo "no pyclblast sdist in $sdist_dir (see this script's header)" >&2; exit 2; }

# 1. The .deb files, unpacked (dpkg -x where there is dpkg, else ar and tar).
root=$prefix/root
rm -rf "$root" "$prefix/wheel" "$prefix/site" "$prefix/lib" "$prefix/tools"
mkdir -p "$root" "$prefix/wheel" "$prefix/lib"
for deb in "${packages[@]}"; do
    if command -v dpkg >/dev/null; then
        dpkg -x "$deb" "$root"
    else
        (cd "$prefix" && ar x "$deb" && tar -xf data.tar.* -C "$root" && rm -f data.tar.* control.tar.* debian-binary)
    fi
done
arch_lib=$(dirname "$(find "$root" -name 'libclblast.so.1' | head -n 1)")
config_dir=$(dirname "$(find "$root" -name CLBlastConfig.cmake | head -n 1)")
[ -d "$arch_lib" ] && [ -d "$config_dir" ] || { echo "no libclblast.so.1 or CLBlastConfig.cmake in $root" >&2; exit 2; }
# Debian's CMake config names the system's libOpenCL.so and /usr/include by absolute path:
# point both at the unpacked copies, so nothing from /usr is needed at build time.
sed -i -e "s#/usr/lib/[a-z0-9_-]*/libOpenCL.so#$arch_lib/libOpenCL.so#g" \
    -e "s#;/usr/include\"#;$root/usr/include\"#" "$config_dir"/CLBlastConfig*.cmake

# 2. Build tools: cmake and ninja from their wheels where the machine has none.
if ! command -v cmake >/dev/null; then
    "$python" -m pip install -q --no-index --find-links "$sdist_dir" --target "$prefix/tools" cmake ninja
    export PATH="$prefix/tools/bin:$PATH" PYTHONPATH="$prefix/tools${PYTHONPATH:+:$PYTHONPATH}"
fi

# pyclblast's CMakeLists looks for a `cython` program; this one is the interpreter's Cython.
mkdir -p "$prefix/tools"
printf '#!/bin/sh\nexec "%s" -m cython "$@"\n' "$(command -v "$python")" > "$prefix/tools/cython"
chmod +x "$prefix/tools/cython"

# 3. The wheel, built against the unpacked CLBlast, installed into a folder of its own.
CPATH="$root/usr/include${CPATH:+:$CPATH}" LIBRARY_PATH="$arch_lib${LIBRARY_PATH:+:$LIBRARY_PATH}" \
    "$python" -m pip wheel -q --no-deps --no-build-isolation --no-index -w "$prefix/wheel" \
    --config-settings=cmake.define.CLBlast_DIR="$config_dir" \
    --config-settings=cmake.define.CYTHON="$prefix/tools/cython" "${sdists[-1]}"
"$python" -m pip install -q --no-deps --no-index --target "$prefix/site" "$prefix"/wheel/pyclblast-*.whl

# 4. At run time only libclblast is needed, plus an OpenCL ICD loader if the machine has
# none (the NVIDIA driver's machine usually has one; PyOpenCL's wheel carries its own).
cp -a "$arch_lib"/libclblast.so* "$prefix/lib/"
if ! ldconfig -p 2>/dev/null | grep -q 'libOpenCL.so.1 '; then
    cp -a "$arch_lib"/libOpenCL.so.1* "$prefix/lib/"
fi
exports="export PYTHONPATH=$prefix/site\${PYTHONPATH:+:\$PYTHONPATH} LD_LIBRARY_PATH=$prefix/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
(eval "$exports" && "$python" -c "import pyclblast; print('pyclblast', pyclblast.__file__)")
echo "$exports"
