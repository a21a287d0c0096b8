// k3 logits: the interface external references compare against. Each --ids list is one
// sequence; all run together through shared engine steps, and each gets a float32 NPY
// [T, vocab] of the logits at every one of its positions.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "args.h"
#include "commands.h"
#include "common_options.h"
#include "k3/error.h"
#include "k3/k3.h"
#include "k3/npy.h"
#include "model_dir.h"

namespace k3::cli {
namespace {

// PREFIX.i.npy for several lists (a trailing .npy on -o is dropped first); -o as given for one.
std::string output_path(const std::string& out, size_t i, size_t n) {
  if (n == 1) return out;
  std::string prefix = out;
  if (prefix.size() > 4 && prefix.compare(prefix.size() - 4, 4, ".npy") == 0)
    prefix.resize(prefix.size() - 4);
  return prefix + "." + std::to_string(i) + ".npy";
}

struct Lane {
  std::vector<int64_t> ids;
  SeqId seq = -1;
  int64_t start_step = 0;  // staggered join
  size_t done = 0;         // tokens already run
  std::vector<float> logits;
};

// Runs all lanes to the end; returns the number of steps.
int64_t run_lanes(Engine& engine, std::vector<Lane>& lanes, int64_t chunk, int64_t V) {
  Batch batch;
  int64_t step = 0;
  for (;; ++step) {
    batch.clear();
    std::vector<Lane*> in_step;
    bool pending = false;
    for (Lane& l : lanes) {
      if (l.done == l.ids.size()) continue;
      pending = true;
      if (step < l.start_step) continue;
      const size_t n = std::min(l.ids.size() - l.done, static_cast<size_t>(chunk));
      batch.add(l.seq, std::span(l.ids).subspan(l.done, n), Batch::Logits::all);
      l.done += n;
      in_step.push_back(&l);
    }
    if (!pending) return step;
    if (in_step.empty()) continue;
    const std::vector<float> logits = engine.step(batch);
    size_t row = 0;
    for (size_t i = 0; i < in_step.size(); ++i) {
      const size_t n = batch.cu_seqlens[i + 1] - batch.cu_seqlens[i];
      in_step[i]->logits.insert(in_step[i]->logits.end(), logits.begin() + row * V,
                                logits.begin() + (row + n) * V);
      row += n;
    }
  }
}

}  // namespace

int cmd_logits(int argc, char** argv) {
  Args args("logits", "[-m DIR] --ids 1,2,3 [--ids 4,5 ...] [--chunk N | --decode] -o OUT.npy",
            "Run token ids through the model and write the logits at every position as float32\n"
            "NPY [T, vocab]. Each --ids list is one sequence; several lists run together as one\n"
            "batch through shared steps and write OUT.0.npy, OUT.1.npy, ... (a trailing .npy on\n"
            "-o is dropped first). --chunk N feeds at most N tokens of a sequence per step;\n"
            "--decode feeds one (recurrent KDA, absorbed MLA). Sequence i joins at step\n"
            "i * --stagger, so prompt chunks and decode tokens share steps.",
            {model_option(),
             {"ids", "", "LIST", "comma-separated token ids (repeat for more sequences)", ""},
             Option("chunk", "", "N", "at most N tokens per sequence per step (default: all)", "")
                 .range(1),
             {"decode", "", "", "one token per step (same as --chunk 1)", ""},
             Option("stagger", "", "N", "steps between the starts of consecutive sequences", "1")
                 .range(0),
             {"output", "o", "OUT.npy", "where to write the logits", ""},
             threads_option(),
             device_option(),
             precision_option()});
  if (!args.parse(argc, argv)) return 0;
  const std::string dir = resolve_model_dir(args);
  const std::string out = args.str("output");
  check(args.has("ids"), "missing required option --ids (see k3 logits --help)");
  const std::vector<std::string> lists = args.all("ids");
  int64_t chunk = args.has("chunk") ? args.integer("chunk") : INT32_MAX;
  check(!(args.has("decode") && args.has("chunk")), "--decode and --chunk exclude each other");
  if (args.has("decode")) chunk = 1;
  const int64_t stagger = args.integer("stagger");
  apply_threads(args);
  apply_device(args);
  apply_precision(args);

  std::vector<Lane> lanes(lists.size());
  int64_t longest = 0, total = 0;
  for (size_t i = 0; i < lists.size(); ++i) {
    const std::string what = lists.size() == 1 ? "--ids" : "--ids #" + std::to_string(i + 1);
    lanes[i].ids = parse_int_list(lists[i], what);
    check(!lanes[i].ids.empty(), what, ": no token ids");
    lanes[i].start_step = static_cast<int64_t>(i) * stagger;
    longest = std::max<int64_t>(longest, lanes[i].ids.size());
    total += static_cast<int64_t>(lanes[i].ids.size());
  }
  auto model = Model::load(dir);
  const int64_t V = model->vocab_size();
  for (size_t i = 0; i < lanes.size(); ++i) {
    for (size_t t = 0; t < lanes[i].ids.size(); ++t) {
      const int64_t id = lanes[i].ids[t];
      check(id >= 0 && id < V, "--ids", lanes.size() == 1 ? "" : " #" + std::to_string(i + 1),
            ": token id ", id, " at position ", t, " is outside the vocabulary [0, ", V, ")");
    }
    check(static_cast<int64_t>(lanes[i].ids.size()) <= model->max_positions(),
          "--ids: ", lanes[i].ids.size(), " tokens exceed max_position_embeddings (",
          model->max_positions(), ")");
  }
  const int64_t n = static_cast<int64_t>(lanes.size());
  Engine engine(*model, {Engine::budget_for(*model, n, longest), n});
  for (Lane& l : lanes) l.seq = engine.create_sequence();
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t steps = run_lanes(engine, lanes, chunk, V);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t i = 0; i < lanes.size(); ++i) {
    const std::string path = output_path(out, i, lanes.size());
    npy_write_f32(path, {static_cast<int64_t>(lanes[i].ids.size()), V}, lanes[i].logits.data());
  }
  std::fprintf(stderr, "k3 logits: %s, %s in %s in %.3f s, %.1f tok/s -> %s\n",
               plural(static_cast<int64_t>(lanes.size()), "sequence").c_str(),
               plural(total, "token").c_str(), plural(steps, "step").c_str(), secs, total / secs,
               output_path(out, 0, lanes.size()).c_str());
  return 0;
}

}  // namespace k3::cli
