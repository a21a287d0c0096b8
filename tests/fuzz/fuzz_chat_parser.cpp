// The chat output parser on arbitrary text. Properties: it never throws; the message JSON it
// produces is valid JSON; streaming the same text in chunks (cut where the first input byte
// says) gives the same message and deltas that add up to it.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz/fuzz_common.h"
#include "k3/chat.h"

namespace {

using k3::fuzz::require;

bool same(const k3::chat::ParsedMessage& a, const k3::chat::ParsedMessage& b) {
  if (a.tool_calls.size() != b.tool_calls.size()) return false;
  for (size_t i = 0; i < a.tool_calls.size(); ++i) {
    const auto &x = a.tool_calls[i], &y = b.tool_calls[i];
    if (x.id != y.id || x.name != y.name || x.arguments != y.arguments) return false;
  }
  return a.reasoning_content == b.reasoning_content && a.content == b.content &&
         a.complete == b.complete;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0] % 16;
  const bool thinking = data[0] & 0x80;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const k3::chat::ParseOptions options{.thinking = thinking};
  const k3::chat::ParsedMessage whole = k3::chat::parse_output(text, options);
  const std::string json = k3::chat::message_json(whole);
  require(!nlohmann::json::parse(json, nullptr, false).is_discarded(), "message_json is JSON");

  k3::chat::StreamParser stream(options);
  std::string reasoning, content;
  size_t calls = 0;
  auto add = [&](const k3::chat::ParseDelta& d) {
    reasoning += d.reasoning_content;
    content += d.content;
    calls += d.tool_calls.size();
  };
  for (size_t at = 0; at < text.size(); at += chunk) add(stream.push(text.substr(at, chunk)));
  add(stream.finish());
  require(same(stream.result(), whole), "streamed result == whole parse");
  require(reasoning == whole.reasoning_content && content == whole.content,
          "deltas add up to the message");
  require(calls == whole.tool_calls.size(), "every call is reported once");
  return 0;
}
