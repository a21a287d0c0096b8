#include "conversation.h"

#include <algorithm>
#include <fstream>
#include <iterator>

#include "k3/error.h"
#include "k3/json_depth.h"

namespace k3::cli {

Conversation::Conversation(const Tokenizer& tok, ChatSettings settings, std::string system)
    : tok_(tok), settings_(std::move(settings)), system_(std::move(system)) {
  reset();
}

void Conversation::reset() {
  messages_ = Json::array();
  if (!system_.empty()) messages_.push_back({{"role", "system"}, {"content", system_}});
  seen_.clear();
  n_seen_ = 0;
}

void Conversation::add_user(const std::string& text) {
  messages_.push_back({{"role", "user"}, {"content", text}});
}

void Conversation::drop_last() {
  if (messages_.empty()) return;
  messages_.erase(messages_.end() - 1);
  if (n_seen_ > messages_.size()) {
    seen_.clear();
    n_seen_ = 0;
  }
}

std::vector<int32_t> Conversation::encode(size_t n_messages, bool generation_prompt) const {
  const Json messages(messages_.begin(),
                      messages_.begin() + static_cast<std::ptrdiff_t>(n_messages));
  return encode_conversation(tok_, messages, settings_, generation_prompt);
}

std::vector<int32_t> Conversation::prompt() const {
  std::vector<int32_t> full = encode(messages_.size(), true);
  if (n_seen_ == 0) return full;
  const std::vector<int32_t> old = encode(n_seen_, false);
  if (old.size() > full.size() || !std::equal(old.begin(), old.end(), full.begin())) return full;
  std::vector<int32_t> out = seen_;
  out.insert(out.end(), full.begin() + static_cast<std::ptrdiff_t>(old.size()), full.end());
  return out;
}

void Conversation::add_answer(const std::vector<int32_t>& prompt, const GenerateResult& r,
                              const chat::ParsedMessage& message) {
  messages_.push_back(Json::parse(chat::message_json(message)));
  if (r.stop == StopReason::eos) {
    seen_ = prompt;
    seen_.insert(seen_.end(), r.tokens.begin(), r.tokens.end());
    n_seen_ = messages_.size();
  } else {
    seen_.clear();
    n_seen_ = 0;
  }
}

void Conversation::save(const std::string& path) const {
  std::ofstream f(path, std::ios::binary);
  check(f.good(), "cannot write ", path);
  f << messages_.dump(2, ' ', false, Json::error_handler_t::replace) << "\n";
  check(f.good(), "cannot write ", path);
}

void Conversation::load(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  check(f.good(), "cannot open ", path);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  check_json_depth(text, path);
  Json j = Json::parse(text, nullptr, false);
  check(!j.is_discarded(), path, ": not valid JSON");
  if (j.is_object() && j.contains("messages")) j = j["messages"];
  check(j.is_array(), path, ": expected a JSON array of messages (or {\"messages\": [...]})");
  try {
    encode_conversation(tok_, j, settings_);
  } catch (const Error& e) {
    fail(path, ": ", e.what());
  }
  messages_ = j;
  seen_.clear();
  n_seen_ = 0;
}

}  // namespace k3::cli
