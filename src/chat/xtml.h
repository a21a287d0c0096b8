// XTML building blocks (spec §10.5): the segments a K3 chat prompt is made of, and how they
// become token ids.
//
// A prompt is a list of segments. A control segment holds structural text (<|open|>, <|close|>,
// <|sep|>, <|end_of_msg|>, the image placeholder) and is encoded with special tokens allowed; a
// plain segment holds tag names, attribute pieces and all user, tool and model text, and is
// encoded with special tokens disallowed, so "<|open|>" typed by a user stays ordinary text.
// Each segment is a separate encode call, so segment boundaries are also pre-token boundaries.
//
//   open tag:   «<|open|>» "tag" (" key" "=\"" "escaped value" "\"")* «<|sep|>»
//   close tag:  «<|close|>» "tag" «<|sep|>»
//   end:        «<|end_of_msg|>»
//
// Empty segments are never stored (encoding_k3.py drops them too, e.g. an empty attribute value
// leaves only " key", "=\"" and "\"").
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "k3/tokenizer.h"

namespace k3::chat {

inline constexpr std::string_view kOpen = "<|open|>";
inline constexpr std::string_view kClose = "<|close|>";
inline constexpr std::string_view kSep = "<|sep|>";
inline constexpr std::string_view kEndOfMsg = "<|end_of_msg|>";
inline constexpr std::string_view kImagePlaceholder = "<|kimi_image_placeholder|>";

struct Segment {
  std::string text;
  bool control = false;  // encoded with special tokens allowed
  bool operator==(const Segment&) const = default;
};

using Attr = std::pair<std::string, std::string>;  // key, unescaped value

// `&` -> `&amp;`, then `"` -> `&quot;`.
std::string escape_attr(std::string_view value);

// Appends to a segment list, dropping empty text.
class SegmentWriter {
 public:
  void control(std::string_view text);
  void plain(std::string_view text);
  void open_tag(std::string_view tag, std::span<const Attr> attrs = {});
  void close_tag(std::string_view tag);
  void end_of_msg() { control(kEndOfMsg); }

  std::vector<Segment>& segments() { return segments_; }
  std::vector<Segment> take() { return std::move(segments_); }

 private:
  std::vector<Segment> segments_;
};

// The ids of the segments, one encode call per segment. The four structural markers are looked
// up by name (Tokenizer::special_id); a tokenizer without them is an error.
std::vector<int32_t> encode_segments(const Tokenizer& tok, std::span<const Segment> segments);

// The prompt as text: the segments concatenated.
std::string segments_text(std::span<const Segment> segments);

// For tests and debugging, in the spec's notation: control segments in «…», plain ones in "…"
// (with \" \\ \n \r \t escaped), separated by single spaces.
std::string segments_debug(std::span<const Segment> segments);

}  // namespace k3::chat
