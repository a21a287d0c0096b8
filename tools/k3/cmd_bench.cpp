// k3 bench: prefill and decode throughput in the manner of llama-bench — lists of prompt sizes,
// generation lengths, thread counts and batch sizes, one table row per test, medians over
// repeats — with each decode row set against the memory-bandwidth floor of its weight bytes.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "args.h"
#include "bench_memory.h"
#include "commands.h"
#include "common_options.h"
#include "k3/error.h"
#include "k3/inspect.h"
#include "k3/k3.h"
#include "model_dir.h"

namespace k3::cli {
namespace {

struct Test {
  std::string name;  // "pp512", "tg128", "tg128@d512"
  int64_t prompt = 0, gen = 0, depth = 0, batch = 1;
  int threads = 1;
};

struct Row {
  Test test;
  std::vector<double> rates;   // tokens/s, one per repeat
  double bytes_per_token = 0;  // decode rows only
  double bandwidth = 0;        // bytes/s at this thread count
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double stddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  double mean = 0, ss = 0;
  for (double x : v) mean += x / v.size();
  for (double x : v) ss += (x - mean) * (x - mean);
  return std::sqrt(ss / (v.size() - 1));
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

class Runner {
 public:
  Runner(const Model& model, uint64_t seed)
      : model_(model), rng_(seed), tok_(0, model.vocab_size() - 1) {}

  // One repeat of a test: tokens/s of the timed part (the prefill of `prompt` tokens per
  // sequence, or `gen` decode steps after an untimed prefill of `depth` tokens).
  double once(const Test& t) {
    const int64_t ctx = std::max(t.prompt, t.depth + t.gen);
    Engine engine(model_, {Engine::budget_for(model_, t.batch, ctx), t.batch});
    std::vector<SeqId> seqs;
    Batch batch;
    for (int64_t b = 0; b < t.batch; ++b) seqs.push_back(engine.create_sequence());
    auto fill = [&](int64_t n) {
      batch.clear();
      std::vector<std::vector<int64_t>> ids(seqs.size(), std::vector<int64_t>(n));
      for (size_t b = 0; b < seqs.size(); ++b) {
        for (int64_t& id : ids[b]) id = tok_(rng_);
        batch.add(seqs[b], ids[b]);
      }
      return ids;  // the batch views these
    };
    double rate = 0;
    if (t.gen == 0) {
      auto ids = fill(t.prompt);
      const auto t0 = std::chrono::steady_clock::now();
      engine.step(batch);
      rate = t.batch * t.prompt / seconds_since(t0);
    } else {
      if (t.depth > 0) {
        auto ids = fill(t.depth);
        engine.step(batch);
      }
      const auto t0 = std::chrono::steady_clock::now();
      for (int64_t i = 0; i < t.gen; ++i) {
        auto ids = fill(1);
        engine.step(batch);
      }
      rate = t.batch * t.gen / seconds_since(t0);
    }
    for (SeqId s : seqs) engine.release(s);
    return rate;
  }

 private:
  const Model& model_;
  std::mt19937_64 rng_;
  std::uniform_int_distribution<int64_t> tok_;
};

std::vector<Test> plan_tests(const Args& args) {
  const auto ps = parse_int_list(args.str("n-prompt"), "-p");
  const auto ns = parse_int_list(args.str("n-gen"), "-n");
  const auto ds = parse_int_list(args.str("n-depth"), "-d");
  const auto bs = parse_int_list(args.str("batch"), "-b");
  const auto ts = args.given("threads") ? parse_int_list(args.str("threads"), "-t")
                                        : std::vector<int64_t>{num_threads()};
  auto positive = [](const std::vector<int64_t>& v, const char* what, int64_t lo) {
    for (int64_t x : v) check(x >= lo, what, " must be at least ", lo, ", got ", x);
  };
  positive(ps, "-p", 0);
  positive(ns, "-n", 0);
  positive(ds, "-d", 0);
  positive(bs, "-b", 1);
  for (int64_t t : ts) check(t >= 1 && t <= 1024, "-t/--threads must be in 1..1024, got ", t);
  std::vector<Test> tests;
  for (int64_t t : ts) {
    for (int64_t b : bs) {
      for (int64_t p : ps)
        if (p > 0) tests.push_back({"pp" + std::to_string(p), p, 0, 0, b, static_cast<int>(t)});
      for (int64_t n : ns) {
        for (int64_t d : ds) {
          if (n == 0) continue;
          std::string name = "tg" + std::to_string(n) + (d ? "@d" + std::to_string(d) : "");
          tests.push_back({name, 0, n, d, b, static_cast<int>(t)});
        }
      }
    }
  }
  check(!tests.empty(), "nothing to run: every -p and -n is 0");
  return tests;
}

// Where the step runs: "cuda", or the CPU's instruction-set path ("avx512", "avx512+amx" on
// AMX tiles, and "avx512+bf16" in bf16 precision, "avx512+bf16+amx" on AMX tiles, "avx512+q8"
// in q8).
std::string backend_name() {
  if (default_device() == "cuda") return "cuda";
  const std::string p = cpu_precision_name();
  if (p == "fp32") return cpu_isa_name();
  if (p.rfind("fp32 (AMX", 0) == 0) return cpu_isa_name() + "+amx";
  if (p.rfind("q8", 0) == 0) return cpu_isa_name() + "+q8";
  return cpu_isa_name() + (p == "bf16 (AMX)" ? "+bf16+amx" : "+bf16");
}

std::string human_bytes(double b) {
  char s[32];
  if (b >= 1e9)
    std::snprintf(s, sizeof s, "%.2f GB", b / 1e9);
  else if (b >= 1e6)
    std::snprintf(s, sizeof s, "%.2f MB", b / 1e6);
  else
    std::snprintf(s, sizeof s, "%.1f kB", b / 1e3);
  return s;
}

void print_markdown(const std::string& model, const CheckpointSummary& ck,
                    const std::vector<Row>& rows) {
  int64_t params = 0;
  for (const TensorSummary& t : ck.tensors) params += t.params;
  std::printf(
      "| model | size | params | backend | threads | batch | test | t/s | weights/token | "
      "floor t/s | of floor |\n");
  std::printf("| --- | ---: | ---: | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |\n");
  for (const Row& r : rows) {
    std::printf("| %s | %s | %.2f M | %s | %d | %lld | %s | %.2f ± %.2f |", model.c_str(),
                human_bytes(static_cast<double>(ck.tensor_bytes)).c_str(), params / 1e6,
                backend_name().c_str(), r.test.threads, (long long)r.test.batch,
                r.test.name.c_str(), median(r.rates), stddev(r.rates));
    if (r.bytes_per_token > 0) {
      const double floor = r.bandwidth / r.bytes_per_token;
      std::printf(" %s | %.1f | %.1f%% |\n", human_bytes(r.bytes_per_token).c_str(), floor,
                  100.0 * median(r.rates) / floor);
    } else {
      std::printf(" | | |\n");
    }
  }
}

nlohmann::json row_json(const std::string& model, const Row& r) {
  nlohmann::json j = {{"model", model},
                      {"backend", backend_name()},
                      {"precision", cpu_precision_name()},
                      {"threads", r.test.threads},
                      {"batch", r.test.batch},
                      {"test", r.test.name},
                      {"n_prompt", r.test.prompt},
                      {"n_gen", r.test.gen},
                      {"n_depth", r.test.depth},
                      {"tokens_per_s_median", median(r.rates)},
                      {"tokens_per_s_stddev", stddev(r.rates)},
                      {"samples_tokens_per_s", r.rates},
                      {"read_bandwidth_bytes_per_s", r.bandwidth}};
  if (r.bytes_per_token > 0) {
    j["weight_bytes_per_token"] = r.bytes_per_token;
    j["floor_tokens_per_s"] = r.bandwidth / r.bytes_per_token;
    j["fraction_of_floor"] = median(r.rates) * r.bytes_per_token / r.bandwidth;
  }
  return j;
}

void print_csv(const std::string& model, const std::vector<Row>& rows) {
  std::printf(
      "model,backend,threads,batch,test,tokens_per_s_median,tokens_per_s_stddev,"
      "weight_bytes_per_token,read_bandwidth_bytes_per_s,fraction_of_floor\n");
  for (const Row& r : rows) {
    const double frac =
        r.bytes_per_token > 0 ? median(r.rates) * r.bytes_per_token / r.bandwidth : 0.0;
    std::printf("%s,%s,%d,%lld,%s,%.4f,%.4f,%.0f,%.0f,%.4f\n", model.c_str(),
                backend_name().c_str(), r.test.threads, (long long)r.test.batch,
                r.test.name.c_str(), median(r.rates), stddev(r.rates), r.bytes_per_token,
                r.bandwidth, frac);
  }
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  Args args(
      "bench", "[-m DIR] [-p LIST] [-n LIST] [-d LIST] [-b LIST] [-t LIST] [-r N] [-o md|json|csv]",
      "Prefill and decode throughput, like llama-bench. Every list is comma-separated and\n"
      "every combination runs: for each thread count and batch, a test ppP per prompt size\n"
      "(one step over P random tokens per sequence) and a test tgN per generation length\n"
      "(N decode steps of one token per sequence; with -d D after an untimed prefill of D\n"
      "tokens, shown tgN@dD). t/s is the median over -r repeats ± the standard deviation,\n"
      "aggregated over the batch. Each decode row also shows the weight bytes a step reads\n"
      "per token, the floor those bytes set at the memory read bandwidth measured in the same\n"
      "run (a STREAM-style sum over 256 MiB with that many threads), and the share of the\n"
      "floor reached. Markdown by default; -o json or csv for scripts.",
      {model_option(),
       Option("n-prompt", "p", "LIST", "prompt sizes (0: none)", "512").also("prompt"),
       Option("n-gen", "n", "LIST", "generation lengths (0: none)", "128").also("gen"),
       Option("n-depth", "d", "LIST", "context already in place before each tgN", "0"),
       Option("batch", "b", "LIST", "sequences running together", "1"),
       Option("repeats", "r", "N", "repeats per test (median reported)", "5").range(1),
       Option("threads", "t", "LIST", "thread counts (default: physical cores)", ""),
       Option("output", "o", "FMT", "md, json or csv", "md"), device_option(), precision_option(),
       seed_option("0")});
  if (!args.parse(argc, argv)) return 0;
  const std::string fmt = args.str("output");
  check(fmt == "md" || fmt == "json" || fmt == "csv", "-o must be md, json or csv, got '", fmt,
        "'");
  apply_device(args);
  apply_precision(args);
  const std::vector<Test> tests = plan_tests(args);
  const std::string dir = resolve_model_dir(args);
  const CheckpointSummary ck = describe_checkpoint(dir);
  std::filesystem::path shown = std::filesystem::absolute(dir).lexically_normal();
  if (shown.filename().empty()) shown = shown.parent_path();
  const std::string name = shown.filename().string();  // the model directory's name
  auto model = Model::load(dir);
  for (const Test& t : tests) {
    check(std::max(t.prompt, t.depth + t.gen) <= model->max_positions(), t.name, " needs ",
          std::max(t.prompt, t.depth + t.gen), " positions; the model has ", model->max_positions(),
          " (max_position_embeddings)");
  }
  const int64_t R = args.integer("repeats");
  Runner runner(*model, static_cast<uint64_t>(args.integer("seed")));
  std::vector<Row> rows;
  const bool progress = isatty(STDERR_FILENO);
  int probed_threads = 0;
  double bandwidth = 0;
  for (const Test& t : tests) {
    set_num_threads(t.threads);
    if (t.threads != probed_threads) {
      bandwidth = read_bandwidth(t.threads);
      probed_threads = t.threads;
    }
    Row row{t, {}, t.gen > 0 ? weight_bytes_per_token(ck, t.batch) : 0.0, bandwidth};
    runner.once(t);  // warm-up, not counted
    for (int64_t r = 0; r < R; ++r) row.rates.push_back(runner.once(t));
    rows.push_back(row);
    if (progress) std::fprintf(stderr, "\rk3 bench: %zu/%zu tests", rows.size(), tests.size());
  }
  if (progress) std::fprintf(stderr, "\n");
  if (fmt == "json") {
    nlohmann::json out = nlohmann::json::array();
    for (const Row& r : rows) out.push_back(row_json(name, r));
    std::printf("%s\n", out.dump(2).c_str());
  } else if (fmt == "csv") {
    print_csv(name, rows);
  } else {
    print_markdown(name, ck, rows);
    std::printf("\nmemory read bandwidth:");
    int last = 0;
    for (const Row& r : rows) {
      if (r.test.threads == last) continue;
      last = r.test.threads;
      std::printf(" %.1f GB/s at -t %d;", r.bandwidth / 1e9, last);
    }
    std::printf(" %s each\n", plural(R, "repeat").c_str());
  }
  return 0;
}

}  // namespace k3::cli
