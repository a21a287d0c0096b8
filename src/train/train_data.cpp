#include "train/train_data.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/parallel.h"
#include "k3/token_file.h"

namespace k3::train {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  check(f.good(), "training data: cannot read ", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TokenStream tokenize_files(const Tokenizer& tok, const std::vector<std::string>& files,
                           int64_t vocab) {
  check(!files.empty(), "training data: no text file given");
  check(tok.n_vocab() <= vocab, "training data: the tokenizer has ", tok.n_vocab(),
        " ids but the model's vocabulary is ", vocab);
  const int32_t sep = tok.special_ids().eos;
  TokenStream s;
  for (const std::string& path : files) {
    std::vector<int32_t> ids;
    if (is_token_file(path)) {  // pre-tokenised by `k3 tokenize -o FILE.k3tok`
      ids = read_token_file(path, tok);
    } else {
      const std::string text = read_text(path);
      check(!text.empty(), "training data: ", path, " is empty");
      ids = tok.encode(text, false);
    }
    check(!ids.empty(), "training data: ", path, " holds no tokens");
    for (int32_t id : ids) {
      s.ids.push_back(id);
      s.bytes.push_back(static_cast<int32_t>(tok.token_to_piece(id).size()));
    }
    if (sep >= 0) {  // a document boundary; it stands for no text byte
      s.ids.push_back(sep);
      s.bytes.push_back(0);
    }
  }
  return s;
}

Window sample_window(const TokenStream& data, int64_t S, std::mt19937_64& rng) {
  const int64_t n = static_cast<int64_t>(data.ids.size());
  check(n >= S + 1, "training data: ", n, " tokens, fewer than one window of ", S + 1,
        " (lower --seq-len or add text)");
  const uint64_t offsets = static_cast<uint64_t>(n - S);  // o in [0, n - S - 1]
  const int64_t o = static_cast<int64_t>(rng() % offsets);
  Window w;
  w.tokens.assign(data.ids.begin() + o, data.ids.begin() + o + S);
  w.targets.assign(data.ids.begin() + o + 1, data.ids.begin() + o + S + 1);
  return w;
}

namespace {

EvalResult eval_result(const TokenStream& data, int64_t S, int64_t count, double nats) {
  int64_t bytes = 0;
  for (int64_t w = 0; w < count; ++w) {
    for (int64_t t = 1; t <= S; ++t) bytes += data.bytes[static_cast<size_t>(w * S + t)];
  }
  EvalResult r;
  r.tokens = count * S;
  r.loss = r.tokens > 0 ? nats / double(r.tokens) : 0;
  r.perplexity = std::exp(r.loss);
  r.bits_per_byte = bytes > 0 ? nats / std::log(2.0) / double(bytes) : 0;
  return r;
}

int64_t eval_windows(const TokenStream& data, int64_t S, int64_t windows) {
  const int64_t n = static_cast<int64_t>(data.ids.size());
  check(n >= S + 1, "held-out data: ", n, " tokens, fewer than one window of ", S + 1);
  return std::min(windows, (n - 1) / S);
}

}  // namespace

EvalResult evaluate(const HParams& hp, const ParamSet& params, const TokenStream& data, int64_t S,
                    int64_t windows, const TrainOptions& opt) {
  const int64_t count = eval_windows(data, S, windows);
  ParamSet scratch = params.zeros_like();  // names for the Scope; no backward runs
  TrainOptions plain = opt;
  plain.router_logits = nullptr;
  plain.loss_only = true;
  // The windows side by side, one per pool thread; summed in window order (any -t, same bits).
  std::vector<double> loss(static_cast<size_t>(std::max<int64_t>(count, 0)));
  parallel_for(count, true, [&](int64_t w) {
    const int64_t* in = data.ids.data() + w * S;
    loss[static_cast<size_t>(w)] = loss_and_grads(hp, params, in, in + 1, S, scratch, plain);
  });
  double nats = 0;
  for (int64_t w = 0; w < count; ++w) nats += loss[static_cast<size_t>(w)] * double(S);
  return eval_result(data, S, count, nats);
}

EvalResult evaluate_with(const TokenStream& data, int64_t S, int64_t windows,
                         const WindowLossSum& loss_sum) {
  const int64_t count = eval_windows(data, S, windows);
  std::vector<Window> ws(static_cast<size_t>(count));
  for (int64_t w = 0; w < count; ++w) {
    const auto in = data.ids.begin() + w * S;
    ws[size_t(w)].tokens.assign(in, in + S);
    ws[size_t(w)].targets.assign(in + 1, in + S + 1);
  }
  return eval_result(data, S, count, count > 0 ? loss_sum(ws) * double(S) : 0.0);
}

}  // namespace k3::train
