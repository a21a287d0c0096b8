// The conversation of k3 chat: OpenAI-style messages, plus the ids the model actually saw for
// them, so that a new turn re-uses the KDA/MLA state and prefills only its own tokens.
//
// After an answer that ended with <|end_of_msg|>, the model's state holds the prompt and the
// generated ids. Re-encoding the parsed answer may tokenise it differently (and KDA state cannot
// be rolled back), so the next prompt is built as: the ids the model saw for the messages so far
// + the chat encoder's ids for the new messages (the encoding of all messages with the old ones'
// ids cut off; the chat format writes messages one after another). An answer that did not end
// with <|end_of_msg|> (cut by -n, a stop string or Ctrl-C) is closed by the encoder instead, and
// the next prompt is the plain encoding, so only its common prefix with the state is re-used.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chat_prompt.h"
#include "k3/chat.h"
#include "k3/generate.h"
#include "k3/tokenizer.h"

namespace k3::cli {

class Conversation {
 public:
  Conversation(const Tokenizer& tok, ChatSettings settings, std::string system);

  void add_user(const std::string& text);
  void drop_last();  // undo add_user after a failed turn
  // The prompt for the next answer: the messages plus the assistant generation prompt.
  std::vector<int32_t> prompt() const;
  // Records the answer to prompt(): `message` is the parsed assistant message.
  void add_answer(const std::vector<int32_t>& prompt, const GenerateResult& r,
                  const chat::ParsedMessage& message);

  void reset();                              // back to the system message only
  void save(const std::string& path) const;  // a JSON array of messages
  void load(const std::string& path);        // an array, or an object with "messages"
  const Json& messages() const { return messages_; }

 private:
  std::vector<int32_t> encode(size_t n_messages, bool generation_prompt) const;

  Tokenizer tok_;
  ChatSettings settings_;
  std::string system_;
  Json messages_ = Json::array();
  std::vector<int32_t> seen_;  // ids the model saw for messages_[0, n_seen_)
  size_t n_seen_ = 0;
};

}  // namespace k3::cli
