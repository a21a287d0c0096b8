// llama-dump-logits: llama.cpp's float32 logits [T, vocab] for a list of token ids, written as
// NPY, so they can be set beside `k3 logits` output (bench/llamacpp/compare_logits.py).
// Built by bench/llamacpp/build.sh against the libllama it builds; not part of k3.cpp.
//
//   llama-dump-logits -m MODEL.gguf --ids 1,2,3 -o OUT.npy [--decode] [-t N]
//
// Default: one llama_decode over all T tokens (the prompt path). --decode: T calls of one
// token each (the incremental path: recurrent KDA state, cached MLA latents).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "llama.h"

namespace {

struct Args {
  std::string model, output;
  std::vector<llama_token> ids;
  bool one_token_per_call = false;
  int threads = 2;
};

[[noreturn]] void usage_exit(const char* why) {
  std::fprintf(stderr,
               "llama-dump-logits: %s\nusage: llama-dump-logits -m MODEL.gguf --ids 1,2,3 -o "
               "OUT.npy [--decode] [-t N]\n",
               why);
  std::exit(2);
}

std::vector<llama_token> parse_ids(const std::string& list) {
  std::vector<llama_token> ids;
  size_t start = 0;
  while (start < list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    if (comma > start) ids.push_back(std::atoi(list.substr(start, comma - start).c_str()));
    start = comma + 1;
  }
  return ids;
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_exit(("no value after " + flag).c_str());
      return argv[++i];
    };
    if (flag == "-m")
      a.model = value();
    else if (flag == "-o")
      a.output = value();
    else if (flag == "--ids")
      a.ids = parse_ids(value());
    else if (flag == "--decode")
      a.one_token_per_call = true;
    else if (flag == "-t")
      a.threads = std::atoi(value().c_str());
    else
      usage_exit(("unknown flag " + flag).c_str());
  }
  if (a.model.empty() || a.output.empty() || a.ids.empty())
    usage_exit("-m, --ids and -o are required");
  return a;
}

// NPY v1.0: magic, header length, a Python dict literal padded so the data starts 64-aligned.
bool write_npy(const std::string& path, const std::vector<float>& values, size_t rows,
               size_t cols) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                       std::to_string(rows) + ", " + std::to_string(cols) + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header.push_back(' ');
  header.push_back('\n');
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  const unsigned char magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  const unsigned short header_len = static_cast<unsigned short>(header.size());
  std::fwrite(magic, 1, sizeof magic, f);
  std::fwrite(&header_len, sizeof header_len, 1, f);
  std::fwrite(header.data(), 1, header.size(), f);
  std::fwrite(values.data(), sizeof(float), values.size(), f);
  return std::fclose(f) == 0;
}

void only_warnings(ggml_log_level level, const char* text, void*) {
  if (level >= GGML_LOG_LEVEL_WARN) std::fputs(text, stderr);
}

// Feeds ids[begin, end) as one batch asking for logits at every position; appends them.
bool decode_span(llama_context* ctx, const std::vector<llama_token>& ids, int begin, int end,
                 int n_vocab, std::vector<float>& logits) {
  llama_batch batch = llama_batch_init(end - begin, 0, 1);
  for (int p = begin; p < end; ++p) {
    const int j = p - begin;
    batch.token[j] = ids[p];
    batch.pos[j] = p;
    batch.n_seq_id[j] = 1;
    batch.seq_id[j][0] = 0;
    batch.logits[j] = 1;
  }
  batch.n_tokens = end - begin;
  const bool ok = llama_decode(ctx, batch) == 0;
  for (int j = 0; ok && j < end - begin; ++j) {
    const float* row = llama_get_logits_ith(ctx, j);
    logits.insert(logits.end(), row, row + n_vocab);
  }
  llama_batch_free(batch);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse_args(argc, argv);
  const int T = static_cast<int>(args.ids.size());
  llama_log_set(only_warnings, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(args.model.c_str(), mp);
  if (!model) {
    std::fprintf(stderr, "llama-dump-logits: cannot load %s\n", args.model.c_str());
    return 1;
  }
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = T + 8;
  cp.n_batch = cp.n_ubatch = T;
  cp.n_seq_max = 1;
  cp.n_threads = cp.n_threads_batch = args.threads;
  cp.type_k = cp.type_v = GGML_TYPE_F32;  // keep the cache out of the comparison
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) {
    std::fprintf(stderr, "llama-dump-logits: cannot make a context\n");
    return 1;
  }
  std::vector<float> logits;
  bool ok = true;
  if (args.one_token_per_call) {
    for (int p = 0; ok && p < T; ++p) ok = decode_span(ctx, args.ids, p, p + 1, n_vocab, logits);
  } else {
    ok = decode_span(ctx, args.ids, 0, T, n_vocab, logits);
  }
  if (!ok) {
    std::fprintf(stderr, "llama-dump-logits: llama_decode failed\n");
    return 1;
  }
  if (!write_npy(args.output, logits, T, n_vocab)) {
    std::fprintf(stderr, "llama-dump-logits: cannot write %s\n", args.output.c_str());
    return 1;
  }
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
