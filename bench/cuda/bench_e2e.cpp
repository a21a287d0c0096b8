// End-to-end on the device: one model load, then prefill of one long prompt and batched decode
// at several batch sizes through k3::Engine with device "cuda". Each step returns its logits
// to the host, so wall-clock times around Engine::step include all device work. The decode
// line per batch is the engine's pinned-buffer path (step_view) with batched calls; the lines
// above it are the variants of the same run.
#include <cuda_profiler_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "backend/cuda/cuda.h"
#include "k3/k3.h"

namespace k3::bench {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int bench_e2e(const std::string& dir, int64_t prefill, const std::vector<int64_t>& batches,
              int64_t steps, double floor_gbs) {
  const double t_load = now_s();
  auto model = Model::load(dir);
  const int64_t V = model->vocab_size();
  int64_t max_b = 1;
  for (int64_t b : batches) max_b = std::max(max_b, b);
  // Room for the prompt or the decode steps' 16 + 3 × steps tokens a sequence (3 variants).
  const int64_t tokens = std::max(prefill, 16 + 3 * steps) + 64;
  Engine engine(*model, {.state_budget_bytes = Engine::budget_for(*model, max_b, tokens),
                         .max_sequences = max_b,
                         .device = "cuda",
                         .cuda_graphs = true});
  const double resident_gb = cuda_resident_bytes() / 1e9;
  std::printf("model %s: load + upload %.1f s, %.2f GB resident on the device\n", dir.c_str(),
              now_s() - t_load, resident_gb);
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> tok(0, V - 1);
  // K3_E2E_PROFILE=1: the last decode step of each batch runs between cudaProfilerStart and
  // Stop (for `ncu --profile-from-start off`: one step's kernels, nothing of the load);
  // K3_E2E_PROFILE=prefill: a fourth bf16 prefill instead.
  const char* profile_env = std::getenv("K3_E2E_PROFILE");
  const bool profile_prefill = profile_env != nullptr && std::string(profile_env) == "prefill";
  const bool profile = profile_env != nullptr && !profile_prefill;
  // The prefill in each matmul precision (k3::set_cpu_precision also sets the device's: bf16
  // rounds the activations of the GEMMs and the routed experts once, as llama.cpp does);
  // decode runs in the precision the process started with.
  const std::string start_precision = cpu_precision_name().rfind("bf16", 0) == 0 ? "bf16" : "fp32";
  // K3_E2E_PRECISIONS=bf16 (or fp32) runs only that one.
  const char* only = std::getenv("K3_E2E_PRECISIONS");
  for (const char* precision : {"fp32", "bf16"}) {
    if (prefill <= 0) break;
    if (only != nullptr && std::strstr(only, precision) == nullptr) continue;
    set_cpu_precision(precision);
    std::vector<int64_t> prompt(prefill);
    for (int64_t& t : prompt) t = tok(rng);
    std::vector<double> tps;
    const bool prof = profile_prefill && std::string(precision) == "bf16";
    for (int r = 0; r < (prof ? 4 : 3); ++r) {  // the profiled run is a fourth, untimed
      SeqId s = engine.create_sequence();
      Batch b;
      b.add(s, prompt);
      if (r == 3) cudaProfilerStart();
      const double t0 = now_s();
      engine.step(b);
      if (r < 3) tps.push_back(prefill / (now_s() - t0));
      if (r == 3) cudaProfilerStop();
      engine.release(s);
    }
    std::printf("prefill %lld tokens, %s: %.0f tok/s (median of 3, first %.0f)\n",
                (long long)prefill, precision, median(tps), tps[0]);
  }
  set_cpu_precision(start_precision);
  // A second engine on the same resident weights launches its decode kernels one by one (no
  // CUDA graphs), for the graphed engine's steps to be measured against in the same rounds.
  Engine launched(*model, {.state_budget_bytes = Engine::budget_for(*model, max_b, tokens),
                           .max_sequences = max_b,
                           .device = "cuda",
                           .cuda_graphs = false});
  for (int64_t B : batches) {
    std::vector<SeqId> seqs[2];  // [0] engine, [1] launched
    Engine* engines[2] = {&engine, &launched};
    for (int e = 0; e < 2; ++e) {
      Batch b;
      std::mt19937_64 prompt_rng(B);  // the same prompts for both
      for (int64_t i = 0; i < B; ++i) {
        seqs[e].push_back(engines[e]->create_sequence());
        std::vector<int64_t> p(16);
        for (int64_t& t : p) t = std::uniform_int_distribution<int64_t>(0, V - 1)(prompt_rng);
        b.add(seqs[e].back(), p);
      }
      engines[e]->step(b);
    }
    Batch b;
    // Variants, interleaved in rounds (medians per variant): the launched engine as the batched
    // step first was (the short conv and the latent append one call per sequence, logits into
    // a fresh vector, the LM head in one piece), the launched engine now (one call a layer,
    // the engine's pinned logits buffer, the LM head in vocabulary chunks whose copies overlap
    // the next chunk's GEMM), and the same step as a CUDA graph.
    struct Variant {
      const char* name;
      int engine;  // 0 graphed, 1 launched
      bool per_sequence;
      bool fresh_vector;  // else step_view
    };
    const Variant variants[] = {
        {"launched, per-sequence calls, fresh vector, LM head in one piece", 1, true, true},
        {"launched, batched calls, step_view", 1, false, false},
        {"CUDA graph, batched calls, step_view", 0, false, false}};
    constexpr int kVariants = 3, kRounds = 4;
    std::vector<double> step_s[kVariants];
    const CudaGraphStats g0 = cuda_graph_stats();
    for (int r = 0; r < kRounds; ++r) {
      for (int v = 0; v < kVariants; ++v) {
        setenv("K3_STEP_PER_SEQUENCE", variants[v].per_sequence ? "1" : "0", 1);
        if (variants[v].per_sequence) {
          setenv("K3_LOGIT_CHUNK_BYTES", "1000000000000", 1);
        } else {
          unsetenv("K3_LOGIT_CHUNK_BYTES");
        }
        Engine& en = *engines[variants[v].engine];
        const std::vector<SeqId>& ss = seqs[variants[v].engine];
        for (int64_t i = 0; i < steps / kRounds; ++i) {
          b.clear();
          std::vector<int64_t> next(B);
          for (int64_t j = 0; j < B; ++j) {
            next[j] = tok(rng);
            b.add(ss[j], std::span(&next[j], 1));
          }
          const bool last = r + 1 == kRounds && v + 1 == kVariants && i + 1 == steps / kRounds;
          if (profile && last) cudaProfilerStart();
          const double t0 = now_s();
          if (variants[v].fresh_vector) {
            en.step(b);
          } else {
            en.step_view(b);
          }
          step_s[v].push_back(now_s() - t0);
          if (profile && last) cudaProfilerStop();
        }
      }
    }
    unsetenv("K3_STEP_PER_SEQUENCE");
    unsetenv("K3_LOGIT_CHUNK_BYTES");
    const CudaGraphStats g1 = cuda_graph_stats();
    for (int v = 0; v < kVariants; ++v) {
      const double m = median(step_s[v]);
      std::printf("  batch %3lld, %s: step %.3f ms, %.1f tok/s\n", (long long)B, variants[v].name,
                  m * 1e3, B / m);
    }
    const int64_t replays = g1.replays - g0.replays, dry_runs = replays + g1.stale - g0.stale;
    std::printf(
        "  batch %3lld graphs: %lld captured, %lld replayed, %lld stale, %lld eager; host dry run "
        "%.1f us a step\n",
        (long long)B, (long long)(g1.captures - g0.captures), (long long)replays,
        (long long)(g1.stale - g0.stale), (long long)(g1.eager - g0.eager),
        dry_runs > 0 ? (g1.dry_s - g0.dry_s) / dry_runs * 1e6 : 0.0);
    const double med = median(step_s[kVariants - 1]), tps = B / med;
    // Batch 1 reads every weight the token uses; the floor counts the bytes given (per token).
    const double floor_tps = floor_gbs > 0 ? 1.0 / (8.88 / floor_gbs) : 0;
    std::printf("decode batch %3lld: step %.3f ms, %.1f tok/s aggregate, %.1f tok/s per sequence",
                (long long)B, med * 1e3, tps, tps / B);
    if (B == 1 && floor_tps > 0)
      std::printf(" (%.1f%% of the %.0f tok/s bytes floor)", 100.0 * tps / floor_tps, floor_tps);
    std::printf("\n");
    for (int e = 0; e < 2; ++e) {
      for (SeqId s : seqs[e]) engines[e]->release(s);
    }
  }
  return 0;
}

}  // namespace k3::bench
