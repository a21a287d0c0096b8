#include "k3/generate.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "k3/hparams.h"
#include "sample/stop_strings.h"

namespace k3 {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Decoded text on its way to the caller: whole UTF-8 characters, stop strings cut out.
class TextOut {
 public:
  TextOut(const Tokenizer& tok, const GenerateParams& p, const PieceCallback& cb, GenerateResult& r)
      : decoder_(tok), stops_(p.stop_strings), cb_(cb), r_(r) {}

  // Returns false when generation must end (a stop string, or the callback cancelled).
  bool push(int32_t id) {
    if (!emit(stops_.push(decoder_.push(id)))) return false;
    if (stops_.matched()) r_.stop = StopReason::stop_string;
    return !stops_.matched();
  }
  void finish() {
    std::string tail = stops_.push(decoder_.finish());
    if (!stops_.matched()) tail += stops_.finish();
    if (!tail.empty()) emit(tail);
  }

 private:
  bool emit(const std::string& piece) {
    r_.text += piece;
    if (cb_ && !cb_(piece)) {
      r_.stop = StopReason::cancelled;
      return false;
    }
    return true;
  }
  StreamDecoder decoder_;
  StopStrings stops_;
  const PieceCallback& cb_;
  GenerateResult& r_;
};

}  // namespace

const char* to_string(StopReason r) {
  switch (r) {
    case StopReason::eos:
      return "eos";
    case StopReason::stop_string:
      return "stop string";
    case StopReason::max_tokens:
      return "max tokens";
    case StopReason::context_full:
      return "context full";
    case StopReason::cancelled:
      return "cancelled";
  }
  return "?";
}

Session::Session(const Model& model, const Tokenizer& tokenizer)
    : model_(model), tokenizer_(tokenizer), seq_(std::make_unique<Sequence>(model)) {
  check(tokenizer.n_vocab() <= model.vocab_size(), "the tokenizer has ", tokenizer.n_vocab(),
        " token ids but the model's vocabulary (config vocab_size) is only ", model.vocab_size(),
        ": the tokenizer files do not belong to this model");
}

Session::~Session() = default;

void Session::reset() {
  seq_->reset();
  tokens_.clear();
  last_logits_.clear();
}

int64_t Session::context_limit(const GenerateParams& params) const {
  const int64_t model_max = model_.hparams().max_positions;
  return params.n_ctx > 0 ? std::min(params.n_ctx, model_max) : model_max;
}

void Session::check_prompt(std::span<const int32_t> prompt, const GenerateParams& params) const {
  check(!prompt.empty(), "the prompt is empty: nothing to generate from");
  const int32_t n_vocab = tokenizer_.n_vocab();
  for (size_t i = 0; i < prompt.size(); ++i) {
    check(prompt[i] >= 0 && prompt[i] < n_vocab, "prompt token id ", prompt[i], " (position ", i,
          ") is outside the vocabulary [0, ", n_vocab, ")");
  }
  const int64_t limit = context_limit(params);
  check(static_cast<int64_t>(prompt.size()) <= limit, "the prompt has ", prompt.size(),
        " tokens, more than the context limit of ", limit, " tokens");
  check(params.max_tokens >= -1, "max_tokens must be >= -1 (-1 = no limit), found ",
        params.max_tokens);
  check(params.prefill_chunk >= 1, "prefill_chunk must be >= 1");
  validate(params.sampling);
  validate(params.logit_bias);
}

bool Session::room_for_more(GenerateResult& r, const GenerateParams& params) const {
  const int64_t n_gen = static_cast<int64_t>(r.tokens.size());
  if (params.max_tokens >= 0 && n_gen >= params.max_tokens) {
    r.stop = StopReason::max_tokens;
    return false;
  }
  if (r.n_prompt + n_gen >= context_limit(params)) {
    r.stop = StopReason::context_full;
    return false;
  }
  return true;
}

int64_t Session::reuse_prefix(std::span<const int32_t> prompt) {
  const bool prefix = !tokens_.empty() && tokens_.size() <= prompt.size() &&
                      std::equal(tokens_.begin(), tokens_.end(), prompt.begin());
  if (!prefix) reset();
  return static_cast<int64_t>(tokens_.size());
}

bool Session::cancelled() const {
  return cancel_ != nullptr && cancel_->load(std::memory_order_relaxed);
}

// Between chunks the state is consistent (tokens_ lists what it holds), so a cancel seen there
// keeps it; the engine polls between layers inside a chunk, and a chunk cancelled there leaves
// the state half-updated: it is reset.
void Session::prefill(std::span<const int32_t> ids, int64_t chunk) {
  const size_t V = static_cast<size_t>(model_.vocab_size());
  seq_->set_cancel_flag(cancel_);
  struct Unset {
    Sequence& seq;
    ~Unset() { seq.set_cancel_flag(nullptr); }
  } unset{*seq_};
  for (size_t at = 0; at < ids.size(); at += static_cast<size_t>(chunk)) {
    if (cancelled())
      throw Cancelled(cat("cancelled after prefilling ", at, " of ", ids.size(), " prompt tokens"));
    auto part = ids.subspan(at, std::min(ids.size() - at, static_cast<size_t>(chunk)));
    std::vector<float> logits;
    try {
      logits = seq_->prefill(std::vector<int64_t>(part.begin(), part.end()));
    } catch (const Cancelled&) {
      reset();
      throw Cancelled(cat("cancelled after prefilling ", at, " of ", ids.size(),
                          " prompt tokens (state reset)"));
    }
    last_logits_.assign(logits.end() - static_cast<std::ptrdiff_t>(V), logits.end());
    tokens_.insert(tokens_.end(), part.begin(), part.end());
  }
}

GenerateResult Session::generate(std::span<const int32_t> prompt, const GenerateParams& params,
                                 const PieceCallback& on_piece) {
  check_prompt(prompt, params);
  GenerateResult r;
  r.n_prompt = static_cast<int64_t>(prompt.size());
  r.n_reused = reuse_prefix(prompt);
  r.n_prefill = r.n_prompt - r.n_reused;
  auto t0 = Clock::now();
  prefill(prompt.subspan(static_cast<size_t>(r.n_reused)), params.prefill_chunk);
  r.prefill_s = seconds_since(t0);

  Sampler sampler(params.sampling, params.logit_bias);
  TextOut out(tokenizer_, params, on_piece, r);
  t0 = Clock::now();
  const size_t n_vocab = static_cast<size_t>(tokenizer_.n_vocab());
  bool more = room_for_more(r, params);
  while (more) {
    if (cancelled()) {  // decode steps are short: polled between tokens, not inside the engine
      r.stop = StopReason::cancelled;
      break;
    }
    const int32_t id = sampler.sample(std::span(last_logits_).first(n_vocab), tokens_);
    r.tokens.push_back(id);
    if (std::find(params.stop_ids.begin(), params.stop_ids.end(), id) != params.stop_ids.end()) {
      r.stop = StopReason::eos;
      break;
    }
    // The last token is not run through the model: nothing would read its logits.
    more = out.push(id) && room_for_more(r, params);
    if (!more) break;
    last_logits_ = seq_->decode(id);
    tokens_.push_back(id);
    ++r.n_decode;
  }
  if (r.stop != StopReason::cancelled) out.finish();
  r.decode_s = seconds_since(t0);
  return r;
}

}  // namespace k3
