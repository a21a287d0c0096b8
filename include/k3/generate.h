// The generation loop shared by the CLI and the server: prompt ids in, text pieces out through
// a callback, with counts and timings for prefill and decode.
//
//   k3::Session session(*model, tokenizer);
//   k3::GenerateParams p{.sampling = {.temperature = 0.7f, .seed = 1}, .max_tokens = 128,
//                        .stop_ids = tokenizer.stop_ids(), .stop_strings = {"\n\n"}};
//   k3::GenerateResult r = session.generate(prompt_ids, p, [](std::string_view piece) {
//     std::fwrite(piece.data(), 1, piece.size(), stdout);
//     return true;  // false cancels
//   });
//
// A Session is one Sequence plus the ids its state holds. generate() takes the whole prompt
// (e.g. the full conversation); when the ids the state holds are a prefix of it, only the rest
// is prefilled (the KDA/MLA state is reused), otherwise the state is reset first. KDA state
// cannot be rolled back, so any difference before the end of the held ids means a reset.
//
// Each generated token is sampled, checked against stop_ids (a stop id ends generation and is
// neither emitted nor fed to the model), turned into text without splitting a UTF-8 character,
// passed through the stop strings, given to the callback, and then fed to the model for the
// next step. The callback is called once per sampled token (the piece may be empty while text
// is held back) and once more at the end if held-back text remains; returning false cancels.
//
// Cancelling from outside (Ctrl-C, another thread): set_cancel_flag(&flag), then setting the
// flag stops generate() within a fraction of a second, also during a long prefill:
//   - during prefill (polled before each prefill_chunk and between layers inside a chunk),
//     generate() throws k3::Cancelled and nothing is generated. The chunks finished before the
//     cancel stay in the state (tokens() lists them, and a next prompt that extends them re-uses
//     them); a chunk cancelled between layers has left the KDA/MLA state half-updated, so the
//     state is reset then (tokens() becomes empty and the next prompt is prefilled from scratch).
//   - after prefill, generation ends before the next token with StopReason::cancelled, the text
//     so far in the result (as when the callback returns false); the state stays consistent.
// The flag is only read; clear it before the next generate() or that one stops at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "k3/model.h"
#include "k3/sampler.h"
#include "k3/tokenizer.h"

namespace k3 {

struct GenerateParams {
  SamplingParams sampling = {};
  int64_t max_tokens = -1;             // tokens to sample at most; -1: until a stop or the context
  int64_t n_ctx = 0;                   // context limit: prompt + generated; 0: the model's maximum
  std::vector<int32_t> stop_ids = {};  // e.g. Tokenizer::stop_ids()
  std::vector<std::string> stop_strings = {};
  LogitBias logit_bias = {};    // e.g. {{eos, -INFINITY}}: never end a message
  int64_t prefill_chunk = 512;  // prefill in pieces of this many tokens (bounds memory, and
                                // the work a cancel of the prefill throws away)
};

enum class StopReason { eos, stop_string, max_tokens, context_full, cancelled };
const char* to_string(StopReason r);

struct GenerateResult {
  std::string text;             // everything given to the callback
  std::vector<int32_t> tokens;  // sampled ids, a stop id included
  StopReason stop = StopReason::max_tokens;
  int64_t n_prompt = 0;   // prompt ids
  int64_t n_reused = 0;   // prompt ids already in the state (not prefilled)
  int64_t n_prefill = 0;  // prompt ids prefilled: n_prompt - n_reused
  int64_t n_decode = 0;   // tokens run through the decode path
  double prefill_s = 0;   // time in prefill
  double decode_s = 0;    // time in the loop after prefill (sampling + decode)
  double prefill_tps() const { return prefill_s > 0 ? n_prefill / prefill_s : 0; }
  double decode_tps() const { return decode_s > 0 ? tokens.size() / decode_s : 0; }
};

// Returns false to cancel generation (e.g. on Ctrl-C).
using PieceCallback = std::function<bool(std::string_view piece)>;

class Session {
 public:
  // Throws k3::Error when the tokenizer has more ids than the model's vocabulary. Model logits
  // beyond the tokenizer's ids (padding) are never sampled.
  Session(const Model& model, const Tokenizer& tokenizer);
  ~Session();

  // Throws k3::Error on an empty prompt, an id outside the vocabulary, a prompt longer than
  // n_ctx, or bad sampling parameters; nothing is run then.
  GenerateResult generate(std::span<const int32_t> prompt, const GenerateParams& params,
                          const PieceCallback& on_piece);
  void reset();
  // nullptr (the default): never cancelled from outside. The flag must outlive its use.
  void set_cancel_flag(const std::atomic<bool>* flag) { cancel_ = flag; }
  const std::vector<int32_t>& tokens() const { return tokens_; }  // the ids the state holds
  int64_t context_limit(const GenerateParams& params) const;

 private:
  int64_t reuse_prefix(std::span<const int32_t> prompt);
  bool room_for_more(GenerateResult& r, const GenerateParams& params) const;
  void prefill(std::span<const int32_t> ids, int64_t chunk);
  bool cancelled() const;
  void check_prompt(std::span<const int32_t> prompt, const GenerateParams& params) const;

  const Model& model_;
  Tokenizer tokenizer_;
  std::unique_ptr<Sequence> seq_;
  std::vector<int32_t> tokens_;
  std::vector<float> last_logits_;  // after the last id in tokens_
  const std::atomic<bool>* cancel_ = nullptr;
};

}  // namespace k3
