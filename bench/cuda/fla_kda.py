"""fla's chunk_kda (issue #13 (a)) and fused_recurrent_kda decode step (issue #13 (b)) at the
shapes of `k3-bench-cuda ops`, for a side-by-side run
on the GPU machine: T = 8192, H = 96, K = V = 128 as one sequence and as a varlen batch of the
same 16 sequences (32K tokens), inputs as the layer makes them (unit-norm q, k; g in (-1, 0);
beta in (0, 1)), fp32 initial state, final state returned. Median of CUDA-event timings
(triton.testing.do_bench). fla-core is carried as a wheel (the device README says how).

  python3 bench/cuda/fla_kda.py [bf16|fp32|decode ...]      (default: bf16 fp32 decode)

`decode` times one KDA decode step (T = 1 per sequence) at batch 1 and 64: as called from
Python (launch overhead included, what a PyTorch server pays) and replayed in a CUDA graph
(the kernel alone, comparable with `k3-bench-cuda`'s graph numbers).
"""
import sys

import torch
import triton
from fla.ops.kda import chunk_kda, fused_recurrent_kda

H, K, V = 96, 128, 128
LENS = [1000, 3096, 1500, 2596, 2047, 2049, 700, 3396, 1900, 2196, 2500, 1596, 3000, 1096,
        1234, 2862]


def inputs(T, dtype, n_seqs):
    dev = "cuda"
    q = torch.nn.functional.normalize(torch.randn(1, T, H, K, device=dev), dim=-1).to(dtype)
    k = torch.nn.functional.normalize(torch.randn(1, T, H, K, device=dev), dim=-1).to(dtype)
    v = torch.randn(1, T, H, V, device=dev).to(dtype)
    g = -(0.05 * torch.randn(1, T, H, K, device=dev).abs() + 1e-3).clamp(max=1.0)
    beta = torch.sigmoid(torch.randn(1, T, H, device=dev)).to(dtype)
    s0 = 0.1 * torch.randn(n_seqs, H, K, V, device=dev)
    return q, k, v, g.to(dtype), beta, s0


def run(name, T, dtype, lens=None):
    n = len(lens) if lens else 1
    q, k, v, g, beta, s0 = inputs(T, dtype, n)
    cu = None
    if lens:
        cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), device="cuda",
                          dtype=torch.long)

    def f():
        return chunk_kda(q, k, v, g, beta, scale=K ** -0.5, initial_state=s0,
                         output_final_state=True, cu_seqlens=cu)

    f()
    torch.cuda.synchronize()
    ms = triton.testing.do_bench(f, warmup=100, rep=500, return_mode="median")
    print(f"fla chunk_kda {name:<34} {dtype}: {ms:8.3f} ms  {T / ms * 1e3:10.0f} tok/s",
          flush=True)


def decode(n_seqs):
    """One decode step of n_seqs sequences: [n, 1, H, K] inputs, fp32 state updated in place."""
    q, k, v, g, beta, s0 = inputs(n_seqs, torch.bfloat16, n_seqs)
    q, k, v, g, beta = (x.view(n_seqs, 1, *x.shape[2:]) for x in (q, k, v, g, beta))

    def f():
        return fused_recurrent_kda(q, k, v, g, beta, scale=K ** -0.5, initial_state=s0,
                                   output_final_state=True)

    f()
    torch.cuda.synchronize()
    eager_us = 1e3 * triton.testing.do_bench(f, warmup=50, rep=300, return_mode="median")
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        f()
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph):
        f()
    graph_us = 1e3 * triton.testing.do_bench(graph.replay, warmup=50, rep=300,
                                             return_mode="median")
    print(f"fla fused_recurrent_kda decode B={n_seqs:<3} H=96 K=V=128 bf16: {eager_us:8.1f} us "
          f"eager  {graph_us:8.1f} us in a CUDA graph", flush=True)


if __name__ == "__main__":
    for dt in sys.argv[1:] or ["bf16", "fp32", "decode"]:
        if dt == "decode":
            for n in (1, 64):
                try:
                    decode(n)
                except Exception as e:  # noqa: BLE001
                    print(f"fla fused_recurrent_kda B={n}: failed: {type(e).__name__}: {e}",
                          flush=True)
            continue
        dtype = torch.bfloat16 if dt == "bf16" else torch.float32
        try:
            run("T=8192 H=96 K=V=128", 8192, dtype)
            run("16 seqs, 32K tokens (varlen)", sum(LENS), dtype, LENS)
        except Exception as e:  # noqa: BLE001 (report and go on with the next dtype)
            print(f"fla chunk_kda {dt}: failed: {type(e).__name__}: {e}", flush=True)
