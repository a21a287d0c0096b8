// Device micro-benchmarks: the card's ceilings (device-to-device copy bandwidth, cuBLAS bf16
// GEMM rate) measured in the same run, then the cuda launchers at K3 shapes on fresh random
// device data (several weight sets rotated so the 60 MB L2 cannot hold them).
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <cmath>
#include <random>

#include "backend/cuda/cuda.h"
#include "backend/cuda/launchers.h"
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

// One KDA layer's decode step for B sequences (H=96, K=V=128), state per sequence.
void kda_decode_case(int64_t B, std::mt19937_64& rng) {
  const int64_t H = 96, K = 128, V = 128;
  auto f = [&](int64_t n, float s) {
    return static_cast<float*>(device_random(n * 4, rng, true, s));
  };
  float *q = f(B * H * K, 0.08f), *k = f(B * H * K, 0.08f), *v = f(B * H * V, 1.0f);
  float* g = f(B * H * K, 0.01f);
  float* beta = f(B * H, 0.3f);
  float* S = f(B * H * K * V, 0.1f);
  float* o = f(B * H * V, 1.0f);
  std::vector<KdaDecodeSeq> seqs(B);
  for (int64_t i = 0; i < B; ++i) seqs[i] = {i, S + i * H * K * V};
  const KdaInputs in{q, k, v, g, beta};
  const double ms = median_ms(g_stream, 3, 20, [&] {
    kda_decode_cuda(in, seqs.data(), B, {0, H, K, V}, o);
  });
  const double state = 2.0 * B * H * K * V * 4;
  std::printf("%-44s %10.4f ms %8.1f GB/s state r+w  (%.1f us per layer)\n",
              ("kda decode step B=" + std::to_string(B) + " H=96 K=V=128").c_str(), ms,
              state / (ms * 1e-3) / 1e9, ms * 1e3);
  for (float* p : {q, k, v, g, beta, S, o}) cudaFree(p);
}

void kda_prefill_case(int64_t T, std::mt19937_64& rng) {
  const int64_t H = 96, K = 128, V = 128;
  auto f = [&](int64_t n, float s) {
    return static_cast<float*>(device_random(n * 4, rng, true, s));
  };
  float *q = f(T * H * K, 0.08f), *k = f(T * H * K, 0.08f), *v = f(T * H * V, 1.0f);
  float* g = f(T * H * K, 0.01f);
  float* beta = f(T * H, 0.3f);
  float* S = f(H * K * V, 0.1f);
  float* o = f(T * H * V, 1.0f);
  const KdaInputs in{q, k, v, g, beta};
  const double ms = median_ms(g_stream, 1, 3, [&] { kda_chunked_cuda(in, {T, H, K, V}, S, o); });
  std::printf("%-44s %10.3f ms %8.0f tok/s\n",
              ("kda prefill T=" + std::to_string(T) + " H=96 K=V=128").c_str(), ms,
              T / (ms * 1e-3));
  for (float* p : {q, k, v, g, beta, S, o}) cudaFree(p);
}

// Absorbed MLA decode: B sequences, each n_past cached latents (contiguous), H=96.
void mla_decode_case(int64_t B, int64_t ctx, double copy_gbs, std::mt19937_64& rng) {
  const int64_t H = 96, Dn = 128, Dr = 64, Dv = 128, Dc = 512, W = Dc + Dr;
  float* cache = static_cast<float*>(device_random(B * ctx * W * 4, rng, true));
  float* q = static_cast<float*>(device_random(B * H * (Dn + Dr) * 4, rng, true, 0.1f));
  float* o = static_cast<float*>(device_random(B * H * Dv * 4, rng, true));
  const Mat uk{H * Dc, Dn, MatFormat::bf16, device_bf16(H * Dc * Dn, rng), nullptr};
  const Mat kvb{H * (Dn + Dv), Dc, MatFormat::bf16, device_bf16(H * (Dn + Dv) * Dc, rng), nullptr};
  const MlaAbsorbedWeights w{uk, kvb};
  const int32_t zero = 0;
  const double ms = median_ms(g_stream, 1, 3, [&] {
    for (int64_t b = 0; b < B; ++b) {
      const PagedRows pr{cache + b * ctx * W, &zero, ctx, 0, W};
      mla_absorbed_cuda(q + b * H * (Dn + Dr), pr, w, {1, ctx - 1, H, Dn, Dr, Dv, Dc},
                        o + b * H * Dv);
    }
  });
  const double bytes = double(B) * ctx * W * 4;
  std::printf(
      "%-44s %10.3f ms %8.1f GB/s cache (%4.1f%% of copy)\n",
      ("mla absorbed decode B=" + std::to_string(B) + " ctx=" + std::to_string(ctx)).c_str(), ms,
      bytes / (ms * 1e-3) / 1e9, 100.0 * bytes / (ms * 1e-3) / 1e9 / copy_gbs);
  cudaFree(cache);
  cudaFree(q);
  cudaFree(o);
  cudaFree(const_cast<void*>(uk.data));
  cudaFree(const_cast<void*>(kvb.data));
}

}  // namespace

int bench_ops() {
  std::mt19937_64 rng(42);
  cuda_backend();
  g_stream = static_cast<cudaStream_t>(cuda_stream_handle());  // where the launchers run
  std::printf("== ceilings\n");
  const double copy = copy_bandwidth();
  gemm_rate(rng);
  std::printf("== linear (weights rotated over sets larger than L2)\n");
  linear_case("bf16 gemv T=1 7168x7168 (8 sets)", MatFormat::bf16, 7168, 7168, 1, 8, copy, rng);
  linear_case("bf16 gemv T=8 7168x7168 (8 sets)", MatFormat::bf16, 7168, 7168, 8, 8, copy, rng);
  linear_case("mxfp4 gemv T=1 3072x3584 (64 sets)", MatFormat::mxfp4, 3072, 3584, 1, 64, copy, rng);
  linear_case("mxfp4 gemv T=1 3584x3072 (64 sets)", MatFormat::mxfp4, 3584, 3072, 1, 64, copy, rng);
  linear_case("bf16 gemm T=4096 7168x7168 (split hi+lo)", MatFormat::bf16, 7168, 7168, 4096, 2,
              copy, rng);
  linear_case("mxfp4 gemm T=512 3072x3584 (widen+split)", MatFormat::mxfp4, 3072, 3584, 512, 4,
              copy, rng);
  std::printf("== kda\n");
  kda_decode_case(1, rng);
  kda_decode_case(64, rng);
  kda_prefill_case(8192, rng);
  std::printf("== mla absorbed decode\n");
  mla_decode_case(1, 4096, copy, rng);
  mla_decode_case(64, 4096, copy, rng);
  mla_decode_case(64, 32768, copy, rng);
  return 0;
}

}  // namespace k3::bench
