// Device micro-benchmarks: the card's ceilings (device-to-device copy bandwidth, cuBLAS bf16
// GEMM rate) measured in the same run, then the cuda launchers at K3 shapes on fresh random
// device data (several weight sets rotated so the 60 MB L2 cannot hold them).
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>

#include "backend/cuda/cuda.h"
#include "backend/cuda/launchers.h"
#include "core/precision.h"
#include "timing.h"

namespace k3::bench {
namespace {

cudaStream_t g_stream = nullptr;

// Device buffer of n random bytes / floats (never zeros).
void* device_random(size_t bytes, std::mt19937_64& rng, bool floats, float scale = 1.0f) {
  std::vector<uint8_t> h(bytes);
  if (floats) {
    std::normal_distribution<float> d(0.0f, scale);
    float* f = reinterpret_cast<float*>(h.data());
    for (size_t i = 0; i < bytes / 4; ++i) f[i] = d(rng);
  } else {
    for (auto& b : h) b = static_cast<uint8_t>(rng());
  }
  void* p = nullptr;
  ck(cudaMalloc(&p, bytes), "malloc");
  ck(cudaMemcpy(p, h.data(), bytes, cudaMemcpyHostToDevice), "upload");
  return p;
}

// Device buffer of n floats: 16 Mi N(0, 1) values repeated (gigabytes without minutes of
// host sampling; the repeat is longer than the L2).
float* device_randn_large(size_t n, std::mt19937_64& rng) {
  const size_t period = std::min(n, size_t{16} << 20);
  std::vector<float> h(period);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (float& x : h) x = d(rng);
  float* p = nullptr;
  ck(cudaMalloc(&p, n * 4), "malloc");
  for (size_t off = 0; off < n; off += period) {
    ck(cudaMemcpy(p + off, h.data(), std::min(period, n - off) * 4, cudaMemcpyHostToDevice),
       "upload");
  }
  return p;
}

// bf16 bits of N(0, 0.02) values; MXFP4 scales near 2^-7 (valid E8M0 codes).
void* device_bf16(size_t n, std::mt19937_64& rng) {
  std::vector<uint16_t> h(n);
  std::normal_distribution<float> d(0.0f, 0.02f);
  for (auto& v : h) {
    const float f = d(rng);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    v = static_cast<uint16_t>(u >> 16);
  }
  void* p = nullptr;
  ck(cudaMalloc(&p, n * 2), "malloc");
  ck(cudaMemcpy(p, h.data(), n * 2, cudaMemcpyHostToDevice), "upload");
  return p;
}

void* device_scales(size_t n, std::mt19937_64& rng) {
  std::vector<uint8_t> h(n);
  for (auto& v : h) v = static_cast<uint8_t>(118 + rng() % 6);
  void* p = nullptr;
  ck(cudaMalloc(&p, n), "malloc");
  ck(cudaMemcpy(p, h.data(), n, cudaMemcpyHostToDevice), "upload");
  return p;
}

double copy_bandwidth() {
  const size_t bytes = size_t{2} << 30;
  void *a = nullptr, *b = nullptr;
  ck(cudaMalloc(&a, bytes), "malloc");
  ck(cudaMalloc(&b, bytes), "malloc");
  ck(cudaMemset(a, 1, bytes), "memset");
  const double ms = median_ms(g_stream, 3, 10, [&] {
    ck(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, g_stream), "copy");
  });
  cudaFree(a);
  cudaFree(b);
  const double gbs = 2.0 * bytes / (ms * 1e-3) / 1e9;
  std::printf("%-44s %10.3f ms %10.1f GB/s (read + write)\n", "copy d2d 2 GiB", ms, gbs);
  return gbs;
}

double gemm_rate(std::mt19937_64& rng) {
  const int n = 8192;
  void* A = device_bf16(size_t{n} * n, rng);
  void* B = device_bf16(size_t{n} * n, rng);
  void* C = nullptr;
  ck(cudaMalloc(&C, size_t{n} * n * 2), "malloc");
  cublasHandle_t h;
  cublasCreate(&h);
  cublasSetStream(h, g_stream);
  const float one = 1, zero = 0;
  const double ms = median_ms(g_stream, 3, 10, [&] {
    cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, A, CUDA_R_16BF, n, B, CUDA_R_16BF, n,
                 &zero, C, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  });
  cublasDestroy(h);
  cudaFree(A);
  cudaFree(B);
  cudaFree(C);
  const double tf = 2.0 * n * n * double(n) / (ms * 1e-3) / 1e12;
  std::printf("%-44s %10.3f ms %10.1f TFLOP/s\n", "cublas bf16 gemm 8192^3 (random)", ms, tf);
  return tf;
}

// linear_cuda over `sets` rotated weight matrices [R, C] of one format, T tokens.
void linear_case(const char* label, MatFormat fmt, int64_t R, int64_t C, int64_t T, int sets,
                 double copy_gbs, std::mt19937_64& rng) {
  std::vector<Mat> mats;
  for (int i = 0; i < sets; ++i) {
    Mat m{R, C, fmt, nullptr, nullptr};
    if (fmt == MatFormat::bf16) m.data = device_bf16(R * C, rng);
    if (fmt == MatFormat::mxfp4) {
      m.data = device_random(R * C / 2, rng, false);
      m.scales = static_cast<const uint8_t*>(device_scales(R * C / 32, rng));
    }
    mats.push_back(m);
  }
  auto* x = static_cast<float*>(device_random(T * C * 4, rng, true));
  float* y = nullptr;
  ck(cudaMalloc(&y, T * R * 4), "malloc");
  int next = 0;
  const double ms = median_ms(g_stream, 3, 20, [&] {
    linear_cuda(x, T, mats[next], y);
    next = (next + 1) % sets;
  });
  const double wbytes = fmt == MatFormat::bf16 ? 2.0 * R * C : R * C / 2.0 + R * C / 32.0;
  const double gbs = wbytes / (ms * 1e-3) / 1e9, tf = 2.0 * T * R * C / (ms * 1e-3) / 1e12;
  std::printf("%-44s %10.4f ms %8.1f GB/s (%4.1f%% of copy) %7.1f TFLOP/s\n", label, ms, gbs,
              100.0 * gbs / copy_gbs, tf);
  for (Mat& m : mats) {
    cudaFree(const_cast<void*>(m.data));
    cudaFree(const_cast<uint8_t*>(m.scales));
  }
  cudaFree(x);
  cudaFree(y);
}

// One KDA layer's decode step for B sequences (H=96, K=V=128), state per sequence; the states
// rotate over sets of at least 256 MB so that repeats do not run from the 60 MB L2.
void kda_decode_case(int64_t B, std::mt19937_64& rng) {
  const int64_t H = 96, K = 128, V = 128, state_floats = B * H * K * V;
  const int sets =
      static_cast<int>(std::max<int64_t>(1, (int64_t{256} << 20) / (state_floats * 4)));
  auto f = [&](int64_t n, float s) {
    return static_cast<float*>(device_random(n * 4, rng, true, s));
  };
  float *q = f(B * H * K, 0.08f), *k = f(B * H * K, 0.08f), *v = f(B * H * V, 1.0f);
  float* g = f(B * H * K, 0.01f);
  float* beta = f(B * H, 0.3f);
  float* S = device_randn_large(state_floats * sets, rng);
  float* o = f(B * H * V, 1.0f);
  std::vector<std::vector<KdaDecodeSeq>> seqs(sets, std::vector<KdaDecodeSeq>(B));
  for (int x = 0; x < sets; ++x)
    for (int64_t i = 0; i < B; ++i) seqs[x][i] = {i, S + x * state_floats + i * H * K * V};
  const KdaInputs in{q, k, v, g, beta};
  int next = 0;
  const double ms = median_ms(g_stream, 3, 30, [&] {
    kda_decode_cuda(in, seqs[next].data(), B, {0, H, K, V}, o);
    next = (next + 1) % sets;
  });
  // Layers back to back (as in a decode step): 8 launches over rotated states, per launch.
  const double ms8 = median_ms(g_stream, 2, 10,
                               [&] {
                                 for (int r = 0; r < 8; ++r) {
                                   kda_decode_cuda(in, seqs[next].data(), B, {0, H, K, V}, o);
                                   next = (next + 1) % sets;
                                 }
                               }) /
                     8;
  // The same 8 layers captured as a CUDA graph (what a captured decode step would launch).
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  ck(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeThreadLocal), "capture");
  for (int r = 0; r < 8; ++r) kda_decode_cuda(in, seqs[r % sets].data(), B, {0, H, K, V}, o);
  ck(cudaStreamEndCapture(g_stream, &graph), "capture end");
  ck(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  const double msg =
      median_ms(g_stream, 2, 20, [&] { ck(cudaGraphLaunch(exec, g_stream), "graph"); }) / 8;
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  // 64 layers as the engine graphs a decode step (cuda_run_graphed: each launch's sequence table
  // comes from the graph's table slab, not a host copy node between the kernels as in the raw
  // capture above). A replay also uploads the slab and waits on the host; 64 layers amortise it.
  constexpr int kLayers = 64;
  auto layers = [&] {
    for (int r = 0; r < kLayers; ++r)
      kda_decode_cuda(in, seqs[r % sets].data(), B, {0, H, K, V}, o);
  };
  const uint64_t key = 0x6b64610000000000ull + static_cast<uint64_t>(B);
  const double mse = median_ms(g_stream, 2, 20, [&] { cuda_run_graphed(key, layers); }) / kLayers;
  const double state = 2.0 * B * H * K * V * 4;
  std::printf("%-44s %10.4f ms %8.1f GB/s state r+w  (%.1f us per layer, %d state sets)\n",
              ("kda decode step B=" + std::to_string(B) + " H=96 K=V=128").c_str(), ms,
              state / (ms * 1e-3) / 1e9, ms * 1e3, sets);
  std::printf("%-44s %10.4f ms %8.1f GB/s state r+w  (%.1f us per layer)\n",
              "  8 layers back to back, per layer", ms8, state / (ms8 * 1e-3) / 1e9, ms8 * 1e3);
  std::printf("%-44s %10.4f ms %8.1f GB/s state r+w  (%.1f us per layer)\n",
              "  8 layers in one CUDA graph, per layer", msg, state / (msg * 1e-3) / 1e9,
              msg * 1e3);
  std::printf("%-44s %10.4f ms %8.1f GB/s state r+w  (%.1f us per layer)\n",
              "  64 layers in one engine graph, per layer", mse, state / (mse * 1e-3) / 1e9,
              mse * 1e3);
  for (float* p : {q, k, v, g, beta, S, o}) cudaFree(p);
}

// Device buffer of n floats f(x) of x ~ N(0, 1), 16 Mi values repeated (as device_randn_large).
template <typename F>
float* device_pattern(size_t n, std::mt19937_64& rng, F&& f) {
  const size_t period = std::min(n, size_t{16} << 20);
  std::vector<float> h(period);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (float& x : h) x = f(d(rng));
  float* p = nullptr;
  ck(cudaMalloc(&p, n * 4), "malloc");
  for (size_t off = 0; off < n; off += period) {
    ck(cudaMemcpy(p + off, h.data(), std::min(period, n - off) * 4, cudaMemcpyHostToDevice),
       "upload");
  }
  return p;
}

// KDA prefill (the chunked form) over a varlen batch of sequences of `lens` tokens, H=96,
// K=V=128, inputs as the layer makes them (q, k of about unit norm, g ∈ (−1, 0), β ∈ (0, 1)),
// one state per sequence; fla's chunk_kda takes 2.61 ms at T = 8192 on this card (issue #13).
void kda_prefill_case(const char* name, const std::vector<int64_t>& lens, bool serial,
                      std::mt19937_64& rng) {
  const int64_t H = 96, K = 128, V = 128, n = static_cast<int64_t>(lens.size());
  int64_t T = 0;
  std::vector<KdaBatchSeq> seqs;
  float* S =
      device_pattern(static_cast<size_t>(n * H * K * V), rng, [](float x) { return 0.1f * x; });
  for (int64_t i = 0; i < n; ++i) {
    seqs.push_back({T, lens[i], S + i * H * K * V});
    T += lens[i];
  }
  const float unit = 1.0f / std::sqrt(static_cast<float>(K));
  auto qk = [unit](float x) { return unit * x; };
  float *q = device_pattern(T * H * K, rng, qk), *k = device_pattern(T * H * K, rng, qk);
  float* v = device_pattern(T * H * V, rng, [](float x) { return x; });
  float* g = device_pattern(T * H * K, rng,
                            [](float x) { return -std::min(1.0f, 0.05f * std::fabs(x) + 1e-3f); });
  float* beta = device_pattern(T * H, rng, [](float x) { return 1.0f / (1.0f + std::exp(-x)); });
  float* o = device_pattern(T * H * V, rng, [](float x) { return x; });
  const KdaInputs in{q, k, v, g, beta};
  const Precision saved = active_precision();
  for (Precision p : {Precision::fp32, Precision::bf16}) {  // fp32-grade, then tf32 products
    set_precision(p);
    const double ms = median_ms(g_stream, 2, 7, [&] {
      kda_chunked_batch_cuda(in, seqs.data(), n, {0, H, K, V}, o);
    });
    std::printf("%-44s %10.3f ms %8.0f tok/s",
                (name + std::string(" ") + precision_name(p)).c_str(), ms, T / (ms * 1e-3));
    if (T == 8192 && n == 1) std::printf("  fla chunk_kda 2.61 ms: %.2fx", 2.61 / ms);
    std::printf("\n");
  }
  set_precision(saved);
  if (serial) {  // the token-serial kernel it replaces, same inputs
    const double ms1 = median_ms(g_stream, 1, 3, [&] {
      kda_recurrent_cuda(in, {T, H, K, V}, S, o);
    });
    std::printf("%-44s %10.3f ms %8.0f tok/s\n", "  token-serial (kda_recurrent_cuda)", ms1,
                T / (ms1 * 1e-3));
  }
  for (float* p : {q, k, v, g, beta, S, o}) cudaFree(p);
}

// Absorbed MLA decode: B sequences of lens[i] cached latents (contiguous), H=96, all in one
// split-KV call; the fp32-grade launcher (the op's) and the bf16-operand one, with the largest
// difference between their outputs relative to max |o|.
void mla_decode_case(const std::string& label, const std::vector<int64_t>& lens, double copy_gbs,
                     std::mt19937_64& rng) {
  const int64_t H = 96, Dn = 128, Dr = 64, Dv = 128, Dc = 512, W = Dc + Dr;
  const int64_t B = static_cast<int64_t>(lens.size());
  int64_t total = 0;
  for (int64_t n : lens) total += n;
  float* cache = device_randn_large(total * W, rng);
  float* q = static_cast<float*>(device_random(B * H * (Dn + Dr) * 4, rng, true, 0.1f));
  float* o = static_cast<float*>(device_random(B * H * Dv * 4, rng, true));
  const Mat uk{H * Dc, Dn, MatFormat::bf16, device_bf16(H * Dc * Dn, rng), nullptr};
  const Mat kvb{H * (Dn + Dv), Dc, MatFormat::bf16, device_bf16(H * (Dn + Dv) * Dc, rng), nullptr};
  const MlaAbsorbedWeights w{uk, kvb};
  static const int32_t zero = 0;
  std::vector<MlaBatchSeq> seqs(B);
  int64_t off = 0;
  for (int64_t b = 0; b < B; ++b) {
    seqs[b] = {b, 1, lens[b] - 1, PagedRows{cache + off * W, &zero, lens[b], 0, W}};
    off += lens[b];
  }
  const MlaShape dims{0, 0, H, Dn, Dr, Dv, Dc};
  const double bytes = double(total) * W * 4;
  std::vector<float> o32(B * H * Dv), o16(B * H * Dv);
  for (int mode = 0; mode < 2; ++mode) {
    auto fn = mode == 0 ? mla_absorbed_batch_cuda : mla_absorbed_batch_bf16_cuda;
    const double ms = median_ms(g_stream, 2, 10, [&] { fn(q, seqs.data(), B, w, dims, o); });
    ck(cudaMemcpy((mode == 0 ? o32 : o16).data(), o, o32.size() * 4, cudaMemcpyDeviceToHost), "o");
    std::printf("%-44s %10.3f ms %8.1f GB/s cache (%4.1f%% of copy)\n",
                ("mla decode " + label + (mode == 0 ? " fp32-grade" : " bf16")).c_str(), ms,
                bytes / (ms * 1e-3) / 1e9, 100.0 * bytes / (ms * 1e-3) / 1e9 / copy_gbs);
  }
  double mx = 0, diff = 0;
  for (size_t i = 0; i < o32.size(); ++i) {
    mx = std::max(mx, double(std::fabs(o32[i])));
    diff = std::max(diff, double(std::fabs(o32[i] - o16[i])));
  }
  std::printf("%-44s max|bf16 - fp32-grade| / max|o| = %.2e\n", ("mla decode " + label).c_str(),
              diff / mx);
  cudaFree(cache);
  cudaFree(q);
  cudaFree(o);
  cudaFree(const_cast<void*>(uk.data));
  cudaFree(const_cast<void*>(kvb.data));
}

// Device-side fill of n pseudo-random bytes (a hash of the index): fast for gigabytes.
void fill_bytes_device(void* p, size_t n, uint64_t seed) {
  std::vector<uint8_t> chunk(size_t{64} << 20);
  for (size_t off = 0; off < n; off += chunk.size()) {
    const size_t m = std::min(chunk.size(), n - off);
    uint64_t s = seed + off;
    for (size_t i = 0; i < m; i += 8) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      const uint64_t v = s ^ (s >> 29);
      std::memcpy(&chunk[i], &v, std::min<size_t>(8, m - i));
    }
    ck(cudaMemcpy(static_cast<uint8_t*>(p) + off, chunk.data(), m, cudaMemcpyHostToDevice), "fill");
  }
}

// One run of moe_case: T tokens; bf16: the expert inputs as bf16 (the model's prefill path,
// moe_experts.h bf16_act), else fp32-grade.
struct MoeRun {
  int64_t T;
  bool bf16 = false;
};

// One LatentMoE layer's routed experts: E MXFP4 experts (I=3072, L=3584), top-k, T tokens.
void moe_case(int64_t E, int64_t k, const std::vector<MoeRun>& runs, double copy_gbs,
              double gemm_tf, std::mt19937_64& rng) {
  const int64_t L = 3584, I = 3072;
  const size_t mat = static_cast<size_t>(I * L / 2), sc = static_cast<size_t>(I * L / 32);
  uint8_t *packed = nullptr, *scales = nullptr;
  ck(cudaMalloc(&packed, 3 * E * mat), "malloc");
  ck(cudaMalloc(&scales, 3 * E * sc), "malloc");
  fill_bytes_device(packed, 3 * E * mat, 1);
  std::vector<uint8_t> hs(3 * E * sc);
  for (auto& b : hs) b = static_cast<uint8_t>(118 + rng() % 6);
  ck(cudaMemcpy(scales, hs.data(), hs.size(), cudaMemcpyHostToDevice), "scales");
  std::vector<ExpertMats> ex(E);
  for (int64_t e = 0; e < E; ++e) {
    auto m = [&](int w, int64_t r, int64_t c) {
      return Mat{r, c, MatFormat::mxfp4, packed + (3 * e + w) * mat, scales + (3 * e + w) * sc};
    };
    ex[e] = {m(0, I, L), m(1, I, L), m(2, L, I)};
  }
  for (const MoeRun& run : runs) {
    const int64_t T = run.T;
    std::vector<int32_t> sel(T * k), ids(E);
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t e = 0; e < E; ++e) ids[e] = static_cast<int32_t>(e);
      std::shuffle(ids.begin(), ids.end(), rng);
      std::sort(ids.begin(), ids.begin() + k);
      std::copy_n(ids.begin(), k, sel.begin() + t * k);
    }
    std::vector<char> used(E, 0);
    for (int32_t e : sel) used[e] = 1;
    const int64_t touched = std::count(used.begin(), used.end(), 1);
    int32_t* dsel = nullptr;
    ck(cudaMalloc(&dsel, sel.size() * 4), "malloc");
    ck(cudaMemcpy(dsel, sel.data(), sel.size() * 4, cudaMemcpyHostToDevice), "sel");
    auto* z = static_cast<float*>(device_random(T * L * 4, rng, true));
    auto* w = static_cast<float*>(device_random(T * k * 4, rng, true, 0.1f));
    float* c = nullptr;
    ck(cudaMalloc(&c, T * L * 4), "malloc");
    const double ms = median_ms(g_stream, 2, 5, [&] {
      moe_experts_cuda(z, dsel, w, ex.data(), {T, k, E, {4.0f, 25.0f}, run.bf16}, c);
    });
    // The host's share: one more call's enqueue time (the GPU idles while it exceeds the
    // kernels' time; small steps with many experts are where it shows).
    const auto h0 = std::chrono::steady_clock::now();
    moe_experts_cuda(z, dsel, w, ex.data(), {T, k, E, {4.0f, 25.0f}, run.bf16}, c);
    const double host_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - h0).count();
    ck(cudaStreamSynchronize(g_stream), "moe");
    const double bytes = touched * 3.0 * (mat + sc), flops = 2.0 * T * k * 3 * I * L;
    const double bytes_ms = bytes / (copy_gbs * 1e9) * 1e3,
                 flop_ms = flops / (gemm_tf * 1e12) * 1e3;
    std::printf(
        "moe E=%lld top-%lld T=%-5lld %s %10.3f ms  %lld experts touched: bytes floor %.3f ms "
        "(%.1f%%), FLOP floor %.3f ms (%.1f%%), host enqueue %.0f us\n",
        (long long)E, (long long)k, (long long)T, run.bf16 ? "bf16" : "fp32", ms,
        (long long)touched, bytes_ms, 100.0 * bytes_ms / ms, flop_ms, 100.0 * flop_ms / ms,
        host_us);
    cudaFree(dsel);
    cudaFree(z);
    cudaFree(w);
    cudaFree(c);
  }
  cudaFree(packed);
  cudaFree(scales);
}

// K3_BENCH_ONLY=kda,mla runs only the named sections (linear, moe, kda, mla) after the ceilings.
bool section(const char* name) {
  const char* only = std::getenv("K3_BENCH_ONLY");
  return only == nullptr || std::strstr(only, name) != nullptr;
}

}  // namespace

int bench_ops() {
  std::mt19937_64 rng(42);
  cuda_backend();
  g_stream = static_cast<cudaStream_t>(cuda_stream_handle());  // where the launchers run
  std::printf("== ceilings\n");
  const double copy = copy_bandwidth();
  const double gemm = gemm_rate(rng);
  if (section("linear")) {
    std::printf("== linear (weights rotated over sets larger than L2)\n");
    linear_case("bf16 gemv T=1 7168x7168 (8 sets)", MatFormat::bf16, 7168, 7168, 1, 8, copy, rng);
    linear_case("bf16 gemv T=8 7168x7168 (8 sets)", MatFormat::bf16, 7168, 7168, 8, 8, copy, rng);
    linear_case("mxfp4 gemv T=1 3072x3584 (64 sets)", MatFormat::mxfp4, 3072, 3584, 1, 64, copy,
                rng);
    linear_case("mxfp4 gemv T=1 3584x3072 (64 sets)", MatFormat::mxfp4, 3584, 3072, 1, 64, copy,
                rng);
    linear_case("bf16 gemm T=4096 7168x7168 (split hi+lo)", MatFormat::bf16, 7168, 7168, 4096, 2,
                copy, rng);
    linear_case("mxfp4 gemm T=512 3072x3584 (widen+split)", MatFormat::mxfp4, 3072, 3584, 512, 4,
                copy, rng);
  }
  if (section("moe")) {
    std::printf("== moe routed experts (MXFP4, latent 3584, expert 3072)\n");
    // T > 128 runs the grouped GEMMs (moe_gemm.cu), T <= 128 the decode kernels (moe_mma.cu):
    // fp32-grade (three bf16 parts) and bf16 precision's inputs (one part); E=32 T=8192 is the
    // e2e slice's prefill shape.
    moe_case(32, 16, {{1}, {1, true}, {16}, {16, true}, {64}, {64, true}, {8192, true}}, copy, gemm,
             rng);
    moe_case(896, 16,
             {{1}, {1, true}, {16}, {64}, {64, true}, {128}, {128, true}, {4096}, {4096, true}},
             copy, gemm, rng);
  }
  if (section("kda")) {
    std::printf("== kda\n");
    if (std::getenv("K3_BENCH_KDA_PREFILL_ONLY") == nullptr) {  // (for a profiler run)
      kda_decode_case(1, rng);
      kda_decode_case(16, rng);
      kda_decode_case(64, rng);
    }
    kda_prefill_case("kda prefill T=8192 H=96 K=V=128", {8192}, true, rng);
    kda_prefill_case("kda prefill 16 seqs, 32K tokens (varlen)",
                     {1000, 3096, 1500, 2596, 2047, 2049, 700, 3396, 1900, 2196, 2500, 1596, 3000,
                      1096, 1234, 2862},
                     false, rng);
  }
  if (section("mla")) {
    std::printf("== mla absorbed decode\n");
    mla_decode_case("B=1 ctx=4096", {4096}, copy, rng);
    mla_decode_case("B=64 ctx=4096", std::vector<int64_t>(64, 4096), copy, rng);
    mla_decode_case("B=64 ctx=32768", std::vector<int64_t>(64, 32768), copy, rng);
    std::vector<int64_t> varlen(64);  // 512 … 64K, 2.1 M rows in all (as 64 × 32K)
    for (int64_t b = 0; b < 64; ++b) varlen[b] = 512 + b * (65536 - 1024) / 63;
    mla_decode_case("B=64 varlen 512..65024", varlen, copy, rng);
  }
  return 0;
}

}  // namespace k3::bench
