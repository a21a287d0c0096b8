// k3 logits: the interface external references compare against. Writes float32 NPY
// [T, vocab] holding the logits at every position of --ids, computed by one prefill pass
// (default) or token by token through the decode path (--decode).
#include <chrono>
#include <cstdio>

#include "args.h"
#include "commands.h"
#include "core/error.h"
#include "core/npy.h"
#include "k3/k3.h"

namespace k3::cli {

int cmd_logits(int argc, char** argv) {
  Args args("logits", "-m DIR --ids 1,2,3 [--decode] -o OUT.npy",
            "Run token ids through the model and write the logits at every position as a float32\n"
            "NPY array [T, vocab]. The default is one prefill pass (chunked KDA, expanded MLA);\n"
            "--decode feeds the tokens one at a time (recurrent KDA, absorbed MLA latent cache).",
            {{"model", "m", "DIR", "checkpoint directory (config.json + safetensors)", ""},
             {"ids", "", "LIST", "comma-separated token ids", ""},
             {"decode", "", "", "run token by token through the decode path", ""},
             {"output", "o", "OUT.npy", "where to write the logits", ""},
             {"threads", "t", "N", "worker threads (default: all cores)", ""}});
  if (!args.parse(argc, argv)) return 0;
  const std::string dir = args.str("model");
  const std::vector<int64_t> ids = parse_int_list(args.str("ids"), "--ids");
  const std::string out = args.str("output");
  if (args.has("threads")) set_num_threads(static_cast<int>(args.integer("threads")));

  auto model = Model::load(dir);
  Sequence seq(*model);
  const int64_t V = model->vocab_size();
  for (size_t t = 0; t < ids.size(); ++t) {
    check(ids[t] >= 0 && ids[t] < V, "--ids: token id ", ids[t], " at position ", t,
          " is outside the vocabulary [0, ", V, ")");
  }
  auto t0 = std::chrono::steady_clock::now();
  std::vector<float> logits;
  if (args.has("decode")) {
    for (int64_t id : ids) {
      std::vector<float> row = seq.decode(id);
      logits.insert(logits.end(), row.begin(), row.end());
    }
  } else {
    logits = seq.prefill(ids);
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  npy_write_f32(out, {static_cast<int64_t>(ids.size()), V}, logits.data());
  std::fprintf(stderr, "k3 logits: %zu tokens (%s) in %.3f s, %.1f tok/s -> %s\n", ids.size(),
               args.has("decode") ? "decode" : "prefill", secs, ids.size() / secs, out.c_str());
  return 0;
}

}  // namespace k3::cli
