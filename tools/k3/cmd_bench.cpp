// k3 bench: prefill and decode throughput, median over repeats (like llama-bench).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "args.h"
#include "commands.h"
#include "common_options.h"
#include "k3/error.h"
#include "k3/k3.h"
#include "model_dir.h"

namespace k3::cli {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void print_line(const char* what, int64_t tokens, const std::vector<double>& v) {
  std::printf("%-8s %13s  %10.2f tok/s (median; min %.2f, max %.2f)\n", what,
              plural(tokens, "token").c_str(), median(v), *std::min_element(v.begin(), v.end()),
              *std::max_element(v.begin(), v.end()));
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  Args args(
      "bench", "[-m DIR] [-p N] [-n N] [-b B] [-r N] [-t N]",
      "Measure prefill tokens/s (one step over -p random tokens per sequence) and decode\n"
      "tokens/s (-n steps of one token per sequence after that prompt); report the median\n"
      "over -r repeats. With --batch B, B sequences prefill in one step and decode together\n"
      "(one token each per step): the aggregate and the per-sequence rates are reported.",
      {model_option(), Option("prompt", "p", "N", "prefill length per sequence", "128").range(1),
       Option("gen", "n", "N", "decode steps", "32").range(0),
       Option("batch", "b", "B", "sequences running together", "1").range(1),
       Option("repeats", "r", "N", "repeats (median reported)", "5").range(1), threads_option(),
       seed_option("0")});
  if (!args.parse(argc, argv)) return 0;
  apply_threads(args);
  const std::string dir = resolve_model_dir(args);
  const int64_t P = args.integer("prompt"), N = args.integer("gen"), R = args.integer("repeats");
  const int64_t B = args.integer("batch");
  auto model = Model::load(dir);
  check(P + N <= model->max_positions(), "-p + -n = ", P + N, " exceeds max_position_embeddings (",
        model->max_positions(), ")");
  std::mt19937_64 rng(static_cast<uint64_t>(args.integer("seed")));
  std::uniform_int_distribution<int64_t> tok(0, model->vocab_size() - 1);
  std::vector<std::vector<int64_t>> prompts(B, std::vector<int64_t>(P));
  for (auto& p : prompts)
    for (int64_t& t : p) t = tok(rng);

  Engine engine(*model, {Engine::budget_for(*model, B, P + N), B});
  std::vector<double> pp, tg;
  Batch batch;
  for (int64_t r = 0; r < R; ++r) {
    std::vector<SeqId> seqs;
    batch.clear();
    for (int64_t b = 0; b < B; ++b) {
      seqs.push_back(engine.create_sequence());
      batch.add(seqs.back(), prompts[b]);
    }
    auto t0 = std::chrono::steady_clock::now();
    engine.step(batch);
    pp.push_back(B * P / seconds_since(t0));
    if (N > 0) {
      std::vector<int64_t> next(B);
      t0 = std::chrono::steady_clock::now();
      for (int64_t i = 0; i < N; ++i) {
        batch.clear();
        for (int64_t b = 0; b < B; ++b) {
          next[b] = tok(rng);
          batch.add(seqs[b], std::span(&next[b], 1));
        }
        engine.step(batch);
      }
      tg.push_back(B * N / seconds_since(t0));
    }
    for (SeqId s : seqs) engine.release(s);
  }
  std::printf("model %s, %s, batch %lld, %s\n", dir.c_str(),
              plural(num_threads(), "thread").c_str(), (long long)B, plural(R, "repeat").c_str());
  std::printf("cpu path %s\n", cpu_isa_name().c_str());
  print_line("prefill", B * P, pp);
  if (N > 0) {
    print_line("decode", B * N, tg);
    if (B > 1) {
      std::vector<double> per(tg);
      for (double& v : per) v /= static_cast<double>(B);
      print_line("  per seq", N, per);
    }
  }
  return 0;
}

}  // namespace k3::cli
