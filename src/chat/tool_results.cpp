// Tool-result ordering (encoding_k3.py's normalize_xtml_tool_result_messages).
#include <algorithm>
#include <map>
#include <optional>

#include "chat/chat_encode.h"

namespace k3::chat {

namespace {

struct CallRef {
  size_t position;  // 1-based, counting every entry of tool_calls
  Json name;        // the function name, or null
};

// Python's str() of an id: strings as they are, other JSON values as JSON text.
std::string id_key(const Json& id) { return id.is_string() ? id.get<std::string>() : id.dump(); }

std::map<std::string, CallRef> index_calls(const Json& tool_calls) {
  std::map<std::string, CallRef> index;
  if (!tool_calls.is_array()) return index;
  for (size_t i = 0; i < tool_calls.size(); ++i) {
    const Json& call = tool_calls[i];
    if (!call.is_object() || !call.contains("id") || call["id"].is_null()) continue;
    const Json& fn =
        call.contains("function") && call["function"].is_object() ? call["function"] : call;
    Json name = fn.contains("name") ? fn["name"] : Json();
    index.try_emplace(id_key(call["id"]), CallRef{i + 1, name});  // first occurrence wins
  }
  return index;
}

bool is_role(const Json& m, const char* role) {
  return m.is_object() && m.contains("role") && m["role"] == role;
}

std::optional<CallRef> match(const Json& message, const std::map<std::string, CallRef>& index) {
  const Json* id = nullptr;
  if (message.contains("tool_call_id")) {
    id = &message["tool_call_id"];
  } else if (message.contains("id")) {
    id = &message["id"];
  }
  if (!id || id->is_null()) return std::nullopt;
  auto it = index.find(id_key(*id));
  if (it == index.end()) return std::nullopt;
  return it->second;
}

}  // namespace

Json reorder_tool_results(const Json& messages) {
  if (!messages.is_array()) return messages;
  Json out = Json::array();
  std::map<std::string, CallRef> index;
  size_t i = 0;
  while (i < messages.size()) {
    const Json& m = messages[i];
    if (!is_role(m, "tool")) {
      if (is_role(m, "assistant")) {
        index = m.contains("tool_calls") ? index_calls(m["tool_calls"]) : decltype(index){};
      }
      out.push_back(m);
      ++i;
      continue;
    }
    struct Item {
      size_t position, offset;
      Json message;
    };
    std::vector<Item> run;
    bool unresolved = false;
    for (size_t offset = 0; i < messages.size() && is_role(messages[i], "tool"); ++i, ++offset) {
      std::optional<CallRef> ref = match(messages[i], index);
      unresolved |= !ref;
      Json message = messages[i];
      if (ref && !ref->name.is_null()) {
        message["tool"] = ref->name;
        if (message.contains("name")) message["name"] = ref->name;
      }
      run.push_back({ref ? ref->position : 0, offset, std::move(message)});
    }
    if (unresolved) {
      for (size_t k = i - run.size(); k < i; ++k) out.push_back(messages[k]);
      continue;
    }
    std::stable_sort(run.begin(), run.end(),
                     [](const Item& a, const Item& b) { return a.position < b.position; });
    for (Item& item : run) out.push_back(std::move(item.message));
  }
  return out;
}

}  // namespace k3::chat
