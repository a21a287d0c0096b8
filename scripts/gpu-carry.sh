#!/usr/bin/env bash
# Prepares what a device call carries (the device tool sends the session's main checkout, not
# a helper's worktree): a copy of this tree, the build dependencies the GPU image lacks
# (nlohmann_json headers, GoogleTest and liblzma static libraries, CMake package files) and
# optionally a build made here, into DEST (an ignored folder of the main checkout, named in
# the call's `carry`).
#   scripts/gpu-carry.sh DEST [BUILD_DIR]
# On the device: ln -sfn "$PWD/DEST/tree" "$(pwd -P of this tree here)" so the test binaries'
# built-in source paths resolve, then run scripts/gpu-check.sh there.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:?usage: scripts/gpu-carry.sh DEST [BUILD_DIR]}
build=${2:-}
rm -rf "$dest/tree"
mkdir -p "$dest/tree"
git ls-files -co --exclude-standard | tar -cf - -T - | tar -xf - -C "$dest/tree"
git rev-parse --short HEAD >"$dest/tree/.commit"
deps=$dest/deps
rm -rf "$deps"
mkdir -p "$deps/include" "$deps/lib/x86_64-linux-gnu/cmake" "$deps/share/cmake"
cp -r /usr/include/nlohmann /usr/include/gtest /usr/include/gmock /usr/include/lzma.h \
  /usr/include/lzma "$deps/include/"
cp /usr/lib/x86_64-linux-gnu/libgtest*.a /usr/lib/x86_64-linux-gnu/libgmock*.a \
  /usr/lib/x86_64-linux-gnu/liblzma.a \
  "$deps/lib/x86_64-linux-gnu/"
cp -r /usr/lib/x86_64-linux-gnu/cmake/GTest "$deps/lib/x86_64-linux-gnu/cmake/"
cp -r /usr/share/cmake/nlohmann_json "$deps/share/cmake/"
# cpp-httplib for `k3 serve` (CMakeLists.txt finds it without pkg-config): its header, the
# headers its definitions pull in, and the shared library with the brotli ones it needs; libssl
# and libcrypto go to lib/fallback, for a device image that lacks them (add it to
# LD_LIBRARY_PATH only then: the image's own are preferred).
if [ -f /usr/include/httplib.h ]; then
  cp -r /usr/include/httplib.h /usr/include/openssl /usr/include/brotli /usr/include/zlib.h \
    /usr/include/zconf.h "$deps/include/"
  cp /usr/include/x86_64-linux-gnu/openssl/* "$deps/include/openssl/"
  cp -P /usr/lib/x86_64-linux-gnu/libcpp-httplib.so* /usr/lib/x86_64-linux-gnu/libbrotli*.so* \
    "$deps/lib/x86_64-linux-gnu/"
  mkdir -p "$deps/lib/fallback"
  cp -L /usr/lib/x86_64-linux-gnu/libssl.so.3 /usr/lib/x86_64-linux-gnu/libcrypto.so.3 \
    "$deps/lib/fallback/"
fi
if [ -n "$build" ]; then
  mkdir -p "$dest/tree/$build/bin"
  for f in test_ops test_model test_engine bin/k3 bin/k3-bench-cuda; do  # stripped copies
    strip -o "$dest/tree/$build/$f" "$build/$f"
  done
fi
du -sh "$dest"
