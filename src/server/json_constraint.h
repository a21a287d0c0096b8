// response_format json_object as constrained decoding: before each sampled token, the tokens
// that cannot continue the answer are masked out (logit -inf), so that the answer's content is
// one JSON object (JsonPrefix) and the answer ends where the object closes.
//
// The answer goes through phases, by token id:
//   think      (only when the prompt opened the think channel) free text, stop ids banned;
//              ends when the model writes <|close|> (or must, to leave room for the object);
//   forced     the rest of `<|close|>think<|sep|><|open|>response<|sep|>`, one id per step;
//   json       plain (non-special) tokens whose bytes keep the content a JSON object prefix,
//              and that leave enough tokens under the request's limit to close the object
//              and stop (every continuation byte is a token of a byte-level vocabulary, so
//              the object closes in closing_size() more tokens at worst);
//   done       the object closed: only a stop id.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "k3/tokenizer.h"
#include "server/json_prefix.h"

namespace k3::server {

// What the constraint needs of a tokenizer, built once and shared by every request.
struct JsonTokens {
  JsonTokens(const Tokenizer& tok, int64_t n_vocab);  // throws k3::Error without chat markers
  std::vector<std::string_view> piece;  // [n_vocab] bytes of plain ids; empty for special ones
  std::vector<int32_t> stop;            // the tokenizer's stop ids
  int32_t close = -1;                   // <|close|>
  std::vector<int32_t> to_response;     // think<|sep|><|open|>response<|sep|> (after <|close|>)
};

class JsonConstraint {
 public:
  JsonConstraint(const JsonTokens& tokens, bool thinking);

  // Sets the logits [n_vocab] of the ids that may not come next to -inf; `remaining` is how many
  // tokens the request may still sample, this one included (when it is too few to close the
  // object, any id that keeps the prefix valid is allowed). False when no id is left (a
  // vocabulary without single-byte tokens could get there).
  bool mask(std::span<float> logits, int64_t remaining) const;
  void accept(int32_t id);  // the sampled id (one that mask() left)
  bool complete() const { return phase_ == Phase::done; }

 private:
  enum class Phase { think, forced, object, done };
  bool is_stop(int32_t id) const;
  // The think channel must close now to leave room for the transition and an object.
  bool must_close_think(int64_t remaining) const;
  bool json_allows(int32_t id, int64_t remaining) const;
  bool mask_json(std::span<float> logits, int64_t remaining) const;

  const JsonTokens& t_;
  Phase phase_;
  size_t forced_at_ = 0;  // next id of t_.to_response
  JsonPrefix json_;
};

}  // namespace k3::server
