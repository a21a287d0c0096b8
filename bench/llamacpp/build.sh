#!/usr/bin/env bash
# Build the llama.cpp peer used by the side-by-side benchmarks, outside this repository.
#
# PyPI is the only code registry reachable from our machines, so the llama.cpp source comes from
# the llama-cpp-python sdist, which vendors it (0.3.36 is the first with the `kimi-k3` arch).
# Only llama.cpp's own C++ tools are built; nothing of it is copied into k3.cpp.
#
#   bench/llamacpp/build.sh          prints the directory holding llama-bench, llama-server, ...
#   env: LCPP_VERSION (0.3.36)  LCPP_ROOT (~/.cache/k3-llamacpp)  JOBS (nproc)
#
# Idempotent: each stage leaves a stamp and is skipped when its stamp is there.
#   $LCPP_ROOT/src/            the vendored llama.cpp tree (+ .k3-version)
#   $LCPP_ROOT/src/build/bin/  CPU Release build (GGML_NATIVE: tuned to this machine's CPU)
#   $LCPP_ROOT/venv/           python for llama.cpp's convert_hf_to_gguf.py (see convert.py)
#   .../bin/llama-dump-logits  bench/llamacpp/dump_logits.cpp linked against libllama
set -euo pipefail
V=${LCPP_VERSION:-0.3.36}
ROOT=${LCPP_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/k3-llamacpp}
JOBS=${JOBS:-$(nproc)}
SRC=$ROOT/src
BUILD=$SRC/build
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
say() { echo "[llamacpp/build] $*" >&2; }
mkdir -p "$ROOT"

fetch_source() {
  [ "$(cat "$SRC/.k3-version" 2>/dev/null)" = "$V" ] && return
  local sdist
  sdist=$(ls "$ROOT"/llama_cpp_python-"$V".tar.gz 2>/dev/null || true)
  if [ -z "$sdist" ]; then
    say "downloading the llama-cpp-python $V sdist from PyPI"
    pip download -q --no-deps --no-binary :all: "llama-cpp-python==$V" -d "$ROOT" >&2
    sdist=$ROOT/llama_cpp_python-$V.tar.gz
  fi
  rm -rf "$SRC" "$ROOT/unpack"
  mkdir -p "$ROOT/unpack"
  tar xzf "$sdist" -C "$ROOT/unpack"
  mv "$ROOT/unpack/llama_cpp_python-$V/vendor/llama.cpp" "$SRC"
  rm -rf "$ROOT/unpack"
  echo "$V" >"$SRC/.k3-version"
}

check_arch() {
  grep -q '"kimi-k3"' "$SRC/src/llama-arch.cpp" ||
    { say "llama-cpp-python $V has no kimi-k3 architecture"; exit 3; }
}

build_tools() {
  [ -f "$BUILD/.k3-built-$V" ] && return
  say "building llama.cpp's CPU tools with -j$JOBS (about 20 minutes on 2 cores)"
  cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_CUDA=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF >&2
  cmake --build "$BUILD" -j"$JOBS" --target llama-bench llama-server llama-perplexity \
    llama-tokenize llama-completion >&2
  touch "$BUILD/.k3-built-$V"
}

build_logits_dumper() {
  local out=$BUILD/bin/llama-dump-logits
  [ -x "$out" ] && [ "$out" -nt "$HERE/dump_logits.cpp" ] && return
  g++ -O2 -std=c++17 -I"$SRC/include" -I"$SRC/ggml/include" "$HERE/dump_logits.cpp" \
    -L"$BUILD/bin" -lllama -lggml -lggml-base -Wl,-rpath,"$BUILD/bin" -o "$out" >&2
}

# The converter imports torch. PyPI's torch wheels bring gigabytes of CUDA libraries; Debian's
# python3-torch is CPU-only, so the venv sees the system site packages. gguf-py is installed
# without its dependencies: it asks for a numpy newer than the one Debian's torch was built on.
make_venv() {
  local py=$ROOT/venv/bin/python
  if [ -x "$py" ] && "$py" -c 'import torch, numpy, safetensors, gguf, transformers' 2>/dev/null; then
    return
  fi
  if ! /usr/bin/python3 -c 'import torch, numpy' 2>/dev/null; then
    say "apt-get install python3-torch python3-numpy python3-venv"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch python3-numpy python3-venv >&2
  fi
  [ -x "$py" ] || /usr/bin/python3 -m venv --system-site-packages "$ROOT/venv" >&2
  "$ROOT/venv/bin/pip" install -q safetensors tiktoken sentencepiece transformers pyyaml >&2
  "$ROOT/venv/bin/pip" install -q --no-deps -e "$SRC/gguf-py" >&2
  if "$ROOT/venv/bin/pip" show numpy 2>/dev/null | grep -q "^Location: $ROOT/venv"; then
    "$ROOT/venv/bin/pip" uninstall -y -q numpy >&2   # keep Debian's numpy under Debian's torch
  fi
  "$py" -c 'import torch, numpy, gguf; torch.from_numpy(numpy.zeros(1))' >&2 ||
    { say "the converter's python does not work"; exit 4; }
}

fetch_source
check_arch
build_tools
build_logits_dumper
make_venv
echo "$BUILD/bin"
