// k3 bench: prefill and decode throughput, median over repeats (like llama-bench).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "args.h"
#include "commands.h"
#include "core/error.h"
#include "k3/k3.h"

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

}  // namespace

int cmd_bench(int argc, char** argv) {
  Args args("bench", "-m DIR [-p N] [-n N] [-r N] [-t N]",
            "Measure prefill tokens/s (one pass over -p random tokens) and decode tokens/s (-n\n"
            "tokens one at a time after that prompt); report the median over -r repeats.",
            {{"model", "m", "DIR", "checkpoint directory", ""},
             {"prompt", "p", "N", "prefill length", "128"},
             {"gen", "n", "N", "decode steps", "32"},
             {"repeats", "r", "N", "repeats (median reported)", "5"},
             {"threads", "t", "N", "worker threads (default: all cores)", ""},
             {"seed", "", "N", "seed for the random token ids", "0"}});
  if (!args.parse(argc, argv)) return 0;
  if (args.has("threads")) set_num_threads(static_cast<int>(args.integer("threads")));
  const int64_t P = args.integer("prompt"), N = args.integer("gen"), R = args.integer("repeats");
  check(P >= 1 && N >= 0 && R >= 1, "-p must be >= 1, -n >= 0, -r >= 1");
  auto model = Model::load(args.str("model"));
  std::mt19937_64 rng(static_cast<uint64_t>(args.integer("seed")));
  std::uniform_int_distribution<int64_t> tok(0, model->vocab_size() - 1);
  std::vector<int64_t> prompt(static_cast<size_t>(P));
  for (int64_t& t : prompt) t = tok(rng);

  std::vector<double> pp, tg;
  for (int64_t r = 0; r < R; ++r) {
    Sequence seq(*model);
    auto t0 = std::chrono::steady_clock::now();
    seq.prefill(prompt);
    pp.push_back(P / seconds_since(t0));
    if (N == 0) continue;
    t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < N; ++i) seq.decode(tok(rng));
    tg.push_back(N / seconds_since(t0));
  }
  std::printf("model %s, %d threads, %lld repeats\n", args.str("model").c_str(), num_threads(),
              (long long)R);
  std::printf("prefill  %6lld tokens  %10.2f tok/s (median; min %.2f, max %.2f)\n", (long long)P,
              median(pp), *std::min_element(pp.begin(), pp.end()),
              *std::max_element(pp.begin(), pp.end()));
  if (N > 0) {
    std::printf("decode   %6lld tokens  %10.2f tok/s (median; min %.2f, max %.2f)\n", (long long)N,
                median(tg), *std::min_element(tg.begin(), tg.end()),
                *std::max_element(tg.begin(), tg.end()));
  }
  return 0;
}

}  // namespace k3::cli
