#!/usr/bin/env bash
# Packs this tree's CUDA build (build/bin/k3 and build/test_train, built here with nvcc) for a
# device call that runs them without building there: stripped and xz-compressed, with the
# shared libraries the GPU machine lacks (cpp-httplib, libedit and theirs), and optionally the
# training corpus. In the device command, from the repository root:
#   source DEST/unpack.sh    # build/bin/k3 and build/test_train, LD_LIBRARY_PATH, /work/main
# then e.g. K3_GPU_PREBUILT=build bash scripts/gpu-train-check.sh, or
# scripts/device-train-gpu.sh all DEST (which wants DEST/k3.xz, DEST/lib.tar.xz, DEST/corpus).
#   scripts/gpu-pack.sh DEST [CORPUS_DIR]   (DEST inside the tree and ignored by git: carry it;
#                                            CORPUS_DIR holds train.txt and heldout.txt)
# Everything is xz-packed because the tracked tree (~42 MB) and the carry share the device
# call's 64 MiB; with a corpus, test_train is left out (a training call does not run it).
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:?usage: scripts/gpu-pack.sh DEST [CORPUS_DIR]}
corpus=${2:-}
for f in build/bin/k3 build/test_train; do
  [ -x "$f" ] || { echo "gpu-pack: $f is missing (cmake --build build --target k3_cli test_train)" >&2; exit 1; }
done
grep -q '^K3_CUDA:BOOL=ON' build/CMakeCache.txt ||
  { echo "gpu-pack: build/ is not a CUDA build (configure with -DK3_CUDA=ON)" >&2; exit 1; }
rm -rf "$dest/lib" "$dest/test_train.xz"
mkdir -p "$dest/lib"
bins=(bin/k3)
[ -n "$corpus" ] || bins+=(test_train)
for f in "${bins[@]}"; do
  strip -o "$dest/tmp" "build/$f"
  xz -T0 -6 -c "$dest/tmp" >"$dest/$(basename "$f").xz"
  rm -f "$dest/tmp"
done
# The libraries k3 links that a bare GPU machine lacks; not the C/C++ runtimes, which its own
# Python stack shares.
ldd build/bin/k3 | awk '/=> \//{print $3}' |
  grep -E 'libcpp-httplib|libedit|libbrotli|libbsd|libmd\.' | xargs -r -I{} cp -L {} "$dest/lib/"
tar -C "$dest" -cJf "$dest/lib.tar.xz" lib && rm -rf "$dest/lib"
if [ -n "$corpus" ]; then
  mkdir -p "$dest/corpus"
  # -9e: the corpus and the tracked tree must fit the device call's 64 MiB carry.
  for f in train.txt heldout.txt; do xz -T0 -9e -c "$corpus/$f" >"$dest/corpus/$f.xz"; done
fi
cat >"$dest/unpack.sh" <<'UNPACK'
# Sourced from the repository root on the GPU machine (scripts/gpu-pack.sh wrote it).
_k3_pack=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p build/bin /work
[ -e /work/main ] || ln -sfn "$PWD" /work/main  # the tests' built-in source path
[ -d "$_k3_pack/lib" ] || tar -C "$_k3_pack" -xJf "$_k3_pack/lib.tar.xz"
for _f in k3:build/bin/k3 test_train:build/test_train; do
  [ -f "$_k3_pack/${_f%%:*}.xz" ] || continue
  python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],"wb"))' \
    "$_k3_pack/${_f%%:*}.xz" "${_f#*:}" && chmod +x "${_f#*:}"
done
export LD_LIBRARY_PATH=$_k3_pack/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export K3_PYTHON=${K3_PYTHON:-$(command -v python3)}
UNPACK
du -sh "$dest"
