#include "chat/xtml.h"

#include "core/error.h"

namespace k3::chat {

std::string escape_attr(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '&') {
      out += "&amp;";
    } else if (c == '"') {
      out += "&quot;";
    } else {
      out += c;
    }
  }
  return out;
}

void SegmentWriter::control(std::string_view text) {
  if (!text.empty()) segments_.push_back({std::string(text), true});
}

void SegmentWriter::plain(std::string_view text) {
  if (!text.empty()) segments_.push_back({std::string(text), false});
}

void SegmentWriter::open_tag(std::string_view tag, std::span<const Attr> attrs) {
  control(kOpen);
  plain(tag);
  for (const auto& [key, value] : attrs) {
    plain(cat(" ", key));
    plain("=\"");
    plain(escape_attr(value));
    plain("\"");
  }
  control(kSep);
}

void SegmentWriter::close_tag(std::string_view tag) {
  control(kClose);
  plain(tag);
  control(kSep);
}

namespace {

int32_t marker_id(const Tokenizer& tok, std::string_view name) {
  int32_t id = tok.special_id(name);
  check(id >= 0, "chat format: the tokenizer has no special token ", name,
        "; the XTML chat format needs <|open|>, <|close|>, <|sep|> and <|end_of_msg|>");
  return id;
}

}  // namespace

std::vector<int32_t> encode_segments(const Tokenizer& tok, std::span<const Segment> segments) {
  const std::pair<std::string_view, int32_t> markers[] = {
      {kOpen, marker_id(tok, kOpen)},
      {kClose, marker_id(tok, kClose)},
      {kSep, marker_id(tok, kSep)},
      {kEndOfMsg, marker_id(tok, kEndOfMsg)},
  };
  std::vector<int32_t> ids;
  for (const Segment& s : segments) {
    int32_t marker = -1;
    if (s.control) {
      for (const auto& [name, id] : markers) {
        if (s.text == name) marker = id;
      }
    }
    if (marker >= 0) {
      ids.push_back(marker);
      continue;
    }
    std::vector<int32_t> part = tok.encode(s.text, s.control);
    ids.insert(ids.end(), part.begin(), part.end());
  }
  return ids;
}

std::string segments_text(std::span<const Segment> segments) {
  std::string out;
  for (const Segment& s : segments) out += s.text;
  return out;
}

std::string segments_debug(std::span<const Segment> segments) {
  std::string out;
  for (const Segment& s : segments) {
    if (!out.empty()) out += ' ';
    if (s.control) {
      out += cat("«", s.text, "»");
      continue;
    }
    out += '"';
    for (char c : s.text) {
      switch (c) {
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        default:
          out += c;
      }
    }
    out += '"';
  }
  return out;
}

}  // namespace k3::chat
