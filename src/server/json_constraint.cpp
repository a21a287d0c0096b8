#include "server/json_constraint.h"

#include <algorithm>
#include <limits>

#include "chat/xtml.h"
#include "k3/error.h"

namespace k3::server {
namespace {

constexpr float kBanned = -std::numeric_limits<float>::infinity();

// Bans every id but those in `keep`.
bool keep_only(std::span<float> logits, std::span<const int32_t> keep) {
  std::vector<float> kept;
  for (int32_t id : keep)
    kept.push_back(id >= 0 && static_cast<size_t>(id) < logits.size() ? logits[id] : kBanned);
  std::fill(logits.begin(), logits.end(), kBanned);
  bool any = false;
  for (size_t i = 0; i < keep.size(); ++i) {
    if (kept[i] == kBanned) continue;
    logits[keep[i]] = kept[i];
    any = true;
  }
  return any;
}

}  // namespace

JsonTokens::JsonTokens(const Tokenizer& tok, int64_t n_vocab)
    : piece(static_cast<size_t>(n_vocab)), stop(tok.stop_ids()) {
  for (int32_t id = 0; id < n_vocab; ++id)
    if (!tok.is_special(id)) piece[id] = tok.token_to_piece(id);
  close = tok.special_id(chat::kClose);
  check(close >= 0 && !stop.empty(),
        "response_format json_object needs a chat tokenizer (<|close|> and a stop id)");
  chat::SegmentWriter w;
  w.close_tag("think");
  w.open_tag("response");
  std::vector<int32_t> ids = chat::encode_segments(tok, w.segments());
  to_response.assign(ids.begin() + 1, ids.end());  // after the <|close|> the model wrote
}

JsonConstraint::JsonConstraint(const JsonTokens& tokens, bool thinking)
    : t_(tokens), phase_(thinking ? Phase::think : Phase::object) {}

bool JsonConstraint::is_stop(int32_t id) const {
  return std::find(t_.stop.begin(), t_.stop.end(), id) != t_.stop.end();
}

bool JsonConstraint::must_close_think(int64_t remaining) const {
  // <|close|>, the transition, the shortest object "{}" and a stop id.
  return remaining <= 1 + static_cast<int64_t>(t_.to_response.size()) + 2 + 1;
}

bool JsonConstraint::json_allows(int32_t id, int64_t remaining) const {
  const std::string_view p = t_.piece[static_cast<size_t>(id)];
  if (p.empty()) return false;
  JsonPrefix next = json_;
  for (char c : p)
    if (!next.push(static_cast<unsigned char>(c))) return false;
  // Room left after this token to close the object (a byte per token at worst) and to stop.
  return next.complete() || next.closing_size() <= remaining - 2;
}

bool JsonConstraint::mask_json(std::span<float> logits, int64_t remaining) const {
  bool any = false;
  for (size_t id = 0; id < logits.size() && id < t_.piece.size(); ++id) {
    if (logits[id] == kBanned) continue;
    if (json_allows(static_cast<int32_t>(id), remaining)) {
      any = true;
    } else {
      logits[id] = kBanned;
    }
  }
  for (size_t id = t_.piece.size(); id < logits.size(); ++id) logits[id] = kBanned;
  return any;
}

bool JsonConstraint::mask(std::span<float> logits, int64_t remaining) const {
  switch (phase_) {
    case Phase::think:
      if (must_close_think(remaining)) return keep_only(logits, std::span(&t_.close, 1));
      for (int32_t id : t_.stop)
        if (id >= 0 && static_cast<size_t>(id) < logits.size()) logits[id] = kBanned;
      return true;
    case Phase::forced:
      return keep_only(logits, std::span(t_.to_response).subspan(forced_at_, 1));
    case Phase::object: {
      std::vector<float> all(logits.begin(), logits.end());
      if (mask_json(logits, remaining)) return true;
      // Too few tokens left to close the object: keep it valid as far as it goes.
      std::copy(all.begin(), all.end(), logits.begin());
      return mask_json(logits, std::numeric_limits<int64_t>::max());
    }
    case Phase::done:
      return keep_only(logits, t_.stop);
  }
  return false;
}

void JsonConstraint::accept(int32_t id) {
  switch (phase_) {
    case Phase::think:
      if (id == t_.close) phase_ = t_.to_response.empty() ? Phase::object : Phase::forced;
      break;
    case Phase::forced:
      if (++forced_at_ == t_.to_response.size()) phase_ = Phase::object;
      break;
    case Phase::object:
      for (char c : t_.piece[static_cast<size_t>(id)]) json_.push(static_cast<unsigned char>(c));
      if (json_.complete()) phase_ = Phase::done;
      break;
    case Phase::done:
      break;
  }
}

}  // namespace k3::server
