// One message of a chat request as XTML segments (encoding_k3.py: the per-role branches of
// build_chat_segments, _render_assistant_segments, normalize_tool_arguments).
#include <optional>

#include "chat/chat_render.h"
#include "core/error.h"
#include "k3/json_depth.h"
#include "tokenizer/unicode_classes.h"
#include "tokenizer/utf8.h"

namespace k3::chat::detail {

namespace {

constexpr const char* kPrefix = "chat request: ";

const Json* find(const Json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

// Python truthiness of an optional field.
bool truthy(const Json* v) {
  if (!v || v->is_null()) return false;
  if (v->is_string()) return !v->get_ref<const std::string&>().empty();
  if (v->is_array() || v->is_object()) return !v->empty();
  if (v->is_boolean()) return v->get<bool>();
  return v->get<double>() != 0;
}

void render_content(SegmentWriter& w, const Json* content, const std::string& where) {
  if (!content || content->is_null()) return;
  if (content->is_string()) {
    w.plain(content->get_ref<const std::string&>());
    return;
  }
  K3_CHECK(content->is_array(), kPrefix, where,
           ": expected a string, null or a list of parts, found ", content->type_name());
  for (size_t i = 0; i < content->size(); ++i) {
    const Json& part = (*content)[i];
    const std::string at = cat(where, "[", i, "]");
    check(part.is_object() && part.contains("type"), kPrefix, at,
          ": expected a content part with a \"type\"");
    const Json& type = part["type"];
    if (type == "image" || type == "image_url") {
      w.control(kImagePlaceholder);
      continue;
    }
    const Json* text = find(part, "text");
    K3_CHECK(text && text->is_string(), kPrefix, at, ": a part of type ", type.dump(),
             " needs a string \"text\"");
    w.plain(text->get_ref<const std::string&>());
  }
}

// <message role="ROLE" [name="…"]>
void open_message(SegmentWriter& w, const Json& message, const std::string& role,
                  const std::string& where) {
  std::vector<Attr> attrs = {{"role", role}};
  const Json* name = find(message, "name");
  if (truthy(name)) attrs.emplace_back("name", py_str(*name, where + ".name"));
  w.open_tag("message", attrs);
}

void close_message(SegmentWriter& w) {
  w.close_tag("message");
  w.end_of_msg();
}

std::string xtml_type(const Json& v) {
  if (v.is_boolean()) return "boolean";
  if (v.is_null()) return "null";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_object()) return "object";
  return "array";
}

// normalize_tool_arguments: an object, or the raw string for a json block.
struct Arguments {
  Json object = Json::object();
  std::optional<std::string> raw;
};

Arguments normalize_arguments(const Json* args, const std::string& where) {
  Arguments out;
  if (!args || args->is_null()) return out;
  if (args->is_object()) {
    out.object = *args;
    return out;
  }
  K3_CHECK(args->is_string(), kPrefix, where,
           ": expected a JSON object or a string holding one, found ", args->type_name());
  const std::string& text = args->get_ref<const std::string&>();
  if (is_blank(text)) return out;
  if (json_too_deep_at(text) != std::string_view::npos) {
    fail(kPrefix, where, ": arguments nested deeper than ", kMaxJsonDepth, " levels");
  }
  Json parsed = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    out.raw = text;
    return out;
  }
  K3_CHECK(parsed.is_object(), kPrefix, where, ": the arguments are JSON but not an object (",
           parsed.type_name(), ")");
  out.object = std::move(parsed);
  return out;
}

void render_tool_call(SegmentWriter& w, const Json& call, size_t index, const std::string& where) {
  K3_CHECK(call.is_object(), kPrefix, where, ": expected an object, found ", call.type_name());
  const Json* function = find(call, "function");
  check(!function || function->is_object(), kPrefix, where, ".function: expected an object");
  const Json& fn = function ? *function : call;
  const std::string fn_where = function ? where + ".function" : where;
  const Json* name = find(fn, "name");
  check(name != nullptr, kPrefix, fn_where, ": the tool call has no \"name\"");
  w.open_tag("call", std::vector<Attr>{{"tool", py_str(*name, fn_where + ".name")},
                                       {"index", std::to_string(index)}});
  Arguments args = normalize_arguments(find(fn, "arguments"), fn_where + ".arguments");
  if (args.raw) {
    w.open_tag("json", std::vector<Attr>{{"type", "object"}});
    w.plain(*args.raw);
    w.close_tag("json");
  } else {
    for (const auto& [key, value] : args.object.items()) {
      w.open_tag("argument", std::vector<Attr>{{"key", key}, {"type", xtml_type(value)}});
      w.plain(value.is_string() ? value.get<std::string>()
                                : py_dumps(value, JsonSeparators::python));
      w.close_tag("argument");
    }
  }
  w.close_tag("call");
}

void render_assistant(SegmentWriter& w, const Json& m, const std::string& where, bool thinking) {
  open_message(w, m, "assistant", where);
  if (thinking) {
    w.open_tag("think");
    const Json* reasoning = find(m, "reasoning_content");
    if (!truthy(reasoning)) reasoning = find(m, "reasoning");
    if (reasoning && !reasoning->is_null()) {
      std::string text = py_str(*reasoning, where + ".reasoning_content");
      if (!is_blank(text)) w.plain(text);
    }
    w.close_tag("think");
  }
  w.open_tag("response");
  render_content(w, find(m, "content"), where + ".content");
  w.close_tag("response");
  const Json* calls = find(m, "tool_calls");
  if (truthy(calls)) {
    K3_CHECK(calls->is_array(), kPrefix, where, ".tool_calls: expected a list, found ",
             calls->type_name());
    w.open_tag("tools");
    for (size_t i = 0; i < calls->size(); ++i) {
      render_tool_call(w, (*calls)[i], i + 1, cat(where, ".tool_calls[", i, "]"));
    }
    w.close_tag("tools");
  }
  close_message(w);
}

// The tool name of a tool message: "tool" (if the key exists), else "name", else the call at the
// same position in the latest assistant message.
std::string tool_name(const Json& m, const std::string& where, const RenderState& state) {
  const Json* name = find(m, "tool");
  if (!name) name = find(m, "name");
  if ((!name || name->is_null()) && state.last_tool_calls.is_array() &&
      state.tool_index <= state.last_tool_calls.size()) {
    const Json& call = state.last_tool_calls[state.tool_index - 1];
    const Json* fn = call.is_object() ? find(call, "function") : nullptr;
    if (call.is_object()) name = find(fn && fn->is_object() ? *fn : call, "name");
  }
  check(name && !name->is_null(), kPrefix, where,
        ": the tool message needs a resolvable tool name: give \"tool_call_id\" of a call in the "
        "preceding assistant message, or \"tool\"/\"name\"");
  return py_str(*name, where + ".name");
}

}  // namespace

std::string py_str(const Json& value, const std::string& where) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "True" : "False";
  K3_CHECK(value.is_number(), kPrefix, where, ": expected a string, found ", value.type_name());
  return py_dumps(value, JsonSeparators::compact);
}

bool is_blank(std::string_view text) {
  if (tok::find_invalid_utf8(text) != std::string_view::npos) return false;
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const auto* end = p + text.size();
  while (p < end) {
    size_t len = 0;
    uint32_t cp = tok::decode_valid_utf8(p, &len);
    if (!tok::py_isspace(cp, tok::char_table()(cp))) return false;
    p += len;
  }
  return true;
}

void render_message(SegmentWriter& w, const Json& m, const std::string& where, RenderState& state) {
  K3_CHECK(m.is_object(), kPrefix, where, ": expected a message object, found ", m.type_name());
  const Json* role_field = find(m, "role");
  check(role_field && role_field->is_string(), kPrefix, where, ".role: expected a string");
  const std::string& role = role_field->get_ref<const std::string&>();
  if (role == "user" || role == "system") {
    const Json* tools = find(m, "tools");
    if (role == "system" && truthy(tools)) {
      render_tool_declare(w, deep_sorted(*tools), /*dynamic=*/true);
      return;
    }
    open_message(w, m, role, where);
    render_content(w, find(m, "content"), where + ".content");
    close_message(w);
  } else if (role == "assistant") {
    const Json* calls = find(m, "tool_calls");
    state.last_tool_calls = calls ? *calls : Json();
    state.tool_index = 0;
    render_assistant(w, m, where, state.thinking);
  } else if (role == "tool") {
    ++state.tool_index;
    std::vector<Attr> attrs = {{"role", "tool"},
                               {"tool", tool_name(m, where, state)},
                               {"index", std::to_string(state.tool_index)}};
    w.open_tag("message", attrs);
    render_content(w, find(m, "content"), where + ".content");
    close_message(w);
  } else {
    fail(kPrefix, where, ".role: unsupported role \"", role,
         "\" (the K3 chat format has system, user, assistant and tool)");
  }
}

}  // namespace k3::chat::detail
