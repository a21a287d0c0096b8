#!/usr/bin/env bash
# A development check of the GPU training pass without a GPU: the batched orchestration of
# src/train/cuda/gpu_*.cpp built against a host stand-in for every device kernel of
# src/train/cuda/train_ops.h (host_kernels.cpp: the CPU ops, loops over the windows), run next to
# the CPU trainer on one checkpoint. It checks the layer wiring, the strided slices, the expert
# grouping and the router-logit hand-over, not the CUDA kernels (their tests need a device).
#   tests/train_gpu_emu/run.sh MODEL_DIR [WINDOWS T PASS_WINDOWS]   (after a build in build/)
set -euo pipefail
cd "$(dirname "$0")/../.."
S=src/train/cuda
out=${TMPDIR:-/tmp}/k3-train-gpu-emu
g++ -std=c++20 -O1 -DK3_HAVE_CUDA=1 -I src -I include tests/train_gpu_emu/compare.cpp \
  tests/train_gpu_emu/host_kernels.cpp $S/gpu_params.cpp $S/gpu_attention.cpp $S/gpu_ffn.cpp \
  $S/gpu_model.cpp $S/gpu_profile.cpp $S/gpu_ns.cpp -o "$out" build/libk3.a -L/usr/local/cuda/lib64 -lcudart_static -lrt -fopenmp \
  -lpthread -ldl
"$out" "$1" "${2:-5}" "${3:-24}" "${4:-2}"
