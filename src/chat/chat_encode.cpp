// The prompt order of encoding_k3.py's build_chat_segments and its fixed system-message texts.
#include "chat/chat_encode.h"

#include "chat/chat_render.h"
#include "core/error.h"
#include "k3/json_depth.h"

namespace k3::chat {

namespace detail {

void render_tool_declare(SegmentWriter& w, const Json& tools, bool dynamic) {
  const std::string head = dynamic
                               ? "## New Tools Available\n"
                                 "The system dynamically extends the toolset via lazy-loading.\n"
                                 "You have access to all existing and extended tools.\n"
                                 "Here are the specs for the extended tools.\n\n"
                               : "# Tools\n"
                                 "Here are the available tools, described in JSONSchema.\n\n";
  const std::vector<Attr> attrs = {{"role", "system"}, {"type", "tool-declare"}};
  w.open_tag("message", attrs);
  w.plain(cat(head, "```json\n", py_dumps(tools, JsonSeparators::compact), "\n```"));
  w.close_tag("message");
  w.end_of_msg();
}

void render_internal_system(SegmentWriter& w, std::string_view type, std::string_view body) {
  const std::vector<Attr> attrs = {{"role", "system"}, {"type", std::string(type)}};
  w.open_tag("message", attrs);
  w.plain(body);  // the fixed bodies have no surrounding whitespace for Python's strip()
  w.close_tag("message");
  w.end_of_msg();
}

}  // namespace detail

namespace {

using detail::render_internal_system;

constexpr const char* kNoMarkdown =
    "Your response must be raw JSON data without markdown code blocks (```json) or any "
    "additional formatting.";

void check_effort(const std::string& effort) {
  check(effort.empty() || effort == "low" || effort == "high" || effort == "max",
        "chat options: thinking_effort must be \"low\", \"high\" or \"max\" (or empty for no "
        "thinking-effort message), found \"",
        effort, "\"");
}

void render_thinking_effort(SegmentWriter& w, const std::string& effort) {
  render_internal_system(
      w, "thinking-effort",
      cat("`thinking_effort` guides on how much to think in your thinking channel (not "
          "including the response channel), supported values include `low`, `medium`, `high`, "
          "and `max`.\nNow the system is invoked with `thinking_effort=",
          effort, "`."));
}

void render_tool_choice(SegmentWriter& w, const Json& choice) {
  if (choice == "required") {
    render_internal_system(w, "tool-choice",
                           "The system is invoked with `tool_choice=required`.\n"
                           "You MUST call tools in the next message.");
  } else if (choice == "none") {
    render_internal_system(w, "tool-choice",
                           "The system is invoked with `tool_choice=none`.\n"
                           "You MUST NOT call any tools in the next message.");
  }
}

// extract_response_schema: json_schema.schema, else json_schema.json_schema, else json_schema.
Json response_schema(const Json& format) {
  if (!format.is_object() || !format.contains("json_schema")) return Json();
  const Json& js = format["json_schema"];
  if (!js.is_object()) return js;
  if (js.contains("schema")) return js["schema"];
  if (js.contains("json_schema")) return js["json_schema"];
  return js;
}

void render_response_format(SegmentWriter& w, const Json& format) {
  const Json type = format.is_object() ? format.value("type", format) : format;
  if (type == "json_object") {
    render_internal_system(
        w, "response-format",
        cat("The system is invoked with `response_format=json_object`.\n", kNoMarkdown));
  } else if (type == "json_schema") {
    const std::string schema =
        py_dumps(deep_sorted(response_schema(format)), JsonSeparators::compact);
    render_internal_system(
        w, "response-format",
        cat("The system is invoked with `response_format=json_schema`.\n", kNoMarkdown,
            "\nThe JSON data must match the following schema:\n", "```json\n", schema, "\n```"));
  }
}

const Json& field(const Json& request, const char* key) {
  static const Json null_value;
  auto it = request.find(key);
  return it == request.end() ? null_value : *it;
}

}  // namespace

std::vector<Segment> build_segments(const Json& request, const Options& options) {
  check(request.is_object(), "chat request: expected a JSON object, found ", request.type_name());
  check_effort(options.thinking_effort);
  const Json& messages = field(request, "messages");
  check(messages.is_array(), "chat request: \"messages\" must be a list, found ",
        messages.type_name());
  const Json& tools = field(request, "tools");
  check(tools.is_null() || tools.is_array(), "chat request: \"tools\" must be a list, found ",
        tools.type_name());

  SegmentWriter w;
  if (!tools.empty()) detail::render_tool_declare(w, deep_sorted(tools), /*dynamic=*/false);
  if (options.thinking && !options.thinking_effort.empty()) {
    render_thinking_effort(w, options.thinking_effort);
  }
  const Json ordered = reorder_tool_results(messages);
  detail::RenderState state;
  state.thinking = options.thinking;
  for (size_t i = 0; i < ordered.size(); ++i) {
    detail::render_message(w, ordered[i], cat("messages[", i, "]"), state);
  }
  render_tool_choice(w, field(request, "tool_choice"));
  render_response_format(w, field(request, "response_format"));
  if (options.add_generation_prompt) {
    const std::vector<Attr> attrs = {{"role", "assistant"}};
    w.open_tag("message", attrs);
    w.open_tag(options.thinking ? "think" : "response");
  }
  return w.take();
}

EncodedChat encode_chat(const Tokenizer& tok, const Json& request, const Options& options) {
  EncodedChat out;
  out.segments = build_segments(request, options);
  out.ids = encode_segments(tok, out.segments);
  return out;
}

std::vector<int32_t> encode_chat_json(const Tokenizer& tok, std::string_view request_json,
                                      const Options& options) {
  check_json_depth(request_json, "chat request");
  const Json request = Json::parse(request_json, nullptr, false);
  check(!request.is_discarded(), "chat request: not valid JSON (UTF-8 JSON text expected)");
  return encode_chat(tok, request, options).ids;
}

}  // namespace k3::chat
