#include "tokenizer/vocab_files.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "k3/json_depth.h"

namespace k3::tok {

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  check(in.good(), "cannot open tokenizer file ", path, ": ", std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  check(!in.bad(), "cannot read tokenizer file ", path);
  return ss.str();
}

// The line shortened for an error message.
std::string shown(std::string_view line) {
  return std::string(line.size() > 60 ? line.substr(0, 60) : line) +
         (line.size() > 60 ? "..." : "");
}

std::string hex_byte(int b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", b);
  return buf;
}

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

bool parse_rank(std::string_view s, int64_t* rank) {
  if (s.empty() || s.size() > 10) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *rank = v;
  return true;
}

struct Line {
  size_t number;
  std::string_view text;
};

std::vector<Line> split_lines(std::string_view data) {
  std::vector<Line> lines;
  size_t number = 0, pos = 0;
  while (pos < data.size()) {
    size_t end = data.find('\n', pos);
    if (end == std::string_view::npos) end = data.size();
    std::string_view line = data.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    ++number;
    if (!line.empty()) lines.push_back({number, line});
    pos = end + 1;
  }
  return lines;
}

}  // namespace

bool base64_decode(std::string_view in, std::string* out, std::string* why) {
  out->clear();
  if (in.size() % 4 != 0) {
    *why = cat("length ", in.size(), " is not a multiple of 4");
    return false;
  }
  for (size_t i = 0; i < in.size(); i += 4) {
    int pad = 0;  // '=' is allowed only as the last one or two characters
    if (i + 4 == in.size() && in[i + 3] == '=') pad = in[i + 2] == '=' ? 2 : 1;
    int v[4] = {0, 0, 0, 0};
    for (int k = 0; k < 4 - pad; ++k) {
      v[k] = base64_value(in[i + k]);
      if (v[k] < 0) {
        *why = cat("invalid character '", in[i + k], "' at position ", i + k);
        return false;
      }
    }
    uint32_t w = (uint32_t(v[0]) << 18) | (uint32_t(v[1]) << 12) | (uint32_t(v[2]) << 6) | v[3];
    out->push_back(static_cast<char>(w >> 16));
    if (pad < 2) out->push_back(static_cast<char>((w >> 8) & 0xFF));
    if (pad < 1) out->push_back(static_cast<char>(w & 0xFF));
  }
  return true;
}

// Splits a line into whitespace-separated fields (at most 3 are kept: two expected, one extra).
size_t split_fields(std::string_view line, std::string_view* fields) {
  size_t n = 0, i = 0;
  while (n < 3) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i == line.size()) break;
    size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
    fields[n++] = line.substr(i, j - i);
    i = j;
  }
  return n;
}

std::vector<std::string> read_tiktoken_model(const std::string& path) {
  std::string data = read_file(path);
  std::vector<Line> lines = split_lines(data);
  check(!lines.empty(), path, ": no tokens (expected lines of '<base64 token bytes> <rank>')");
  const size_t n = lines.size();
  std::vector<std::string> tokens(n);
  std::vector<size_t> line_of_rank(n, 0);
  std::vector<std::string_view> base64_of_rank(n);
  for (const Line& line : lines) {
    std::string_view f[3];
    check(split_fields(line.text, f) == 2, path, ":", line.number,
          ": expected '<base64 token bytes> <rank>', found '", shown(line.text), "'");
    int64_t rank = 0;
    check(parse_rank(f[1], &rank), path, ":", line.number, ": rank '", shown(f[1]),
          "' is not a non-negative integer");
    check(rank < static_cast<int64_t>(n), path, ":", line.number, ": rank ", rank,
          " is out of range: the file has ", n, " tokens, so ranks must be 0..", n - 1,
          " with each used once");
    check(line_of_rank[rank] == 0, path, ":", line.number, ": rank ", rank,
          " already used on line ", line_of_rank[rank], " (ranks must be 0..", n - 1,
          " with each used once)");
    std::string why;
    check(base64_decode(f[0], &tokens[rank], &why), path, ":", line.number, ": bad base64 '",
          shown(f[0]), "': ", why);
    check(!tokens[rank].empty(), path, ":", line.number, ": empty token");
    line_of_rank[rank] = line.number;
    base64_of_rank[rank] = f[0];
  }
  // tokens no longer moves, so views into it are stable.
  std::unordered_map<std::string_view, size_t> line_of_bytes;
  line_of_bytes.reserve(n);
  for (size_t rank = 0; rank < n; ++rank) {
    auto [it, added] = line_of_bytes.emplace(tokens[rank], line_of_rank[rank]);
    if (!added) {
      size_t first = std::min(it->second, line_of_rank[rank]);
      size_t second = std::max(it->second, line_of_rank[rank]);
      fail(path, ":", second, ": token bytes '", shown(base64_of_rank[rank]), "' duplicate line ",
           first);
    }
  }
  for (int b = 0; b < 256; ++b) {
    check(line_of_bytes.count(std::string(1, static_cast<char>(b))) > 0, path,
          ": no token for the single byte ", hex_byte(b),
          ": a byte-level vocabulary must hold all 256 single bytes");
  }
  return tokens;
}

namespace {

using nlohmann::json;

// A *_token field: a string, or an object with a "content" string; empty when absent/null.
std::string token_name(const json& config, const char* key, const std::string& path) {
  if (!config.contains(key) || config[key].is_null()) return "";
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  check(v.is_object() && v.contains("content") && v["content"].is_string(), path, ": ", key,
        " must be a string or an object with a string \"content\"");
  return v["content"].get<std::string>();
}

void read_added_tokens(const json& decoder, const std::string& path, int32_t vocab_base,
                       SpecialConfig& out) {
  check(decoder.is_object(), path, ": added_tokens_decoder must be an object");
  for (const auto& [key, entry] : decoder.items()) {
    int64_t id = 0;
    check(parse_rank(key, &id), path, ": added_tokens_decoder key \"", key, "\" is not a token id");
    check(id >= vocab_base && id < vocab_base + kNumSpecialTokens, path,
          ": added_tokens_decoder id ", id, " is outside the special-token range ", vocab_base,
          "..", vocab_base + kNumSpecialTokens - 1, " (tiktoken.model has ", vocab_base,
          " base tokens)");
    check(entry.is_object() && entry.contains("content") && entry["content"].is_string() &&
              !entry["content"].get<std::string>().empty(),
          path, ": added_tokens_decoder[\"", key, "\"] needs a non-empty string \"content\"");
    bool special = true;
    if (entry.contains("special")) {
      check(entry["special"].is_boolean(), path, ": added_tokens_decoder[\"", key,
            "\"].special must be true or false");
      special = entry["special"].get<bool>();
    }
    out.names[id - vocab_base] = entry["content"].get<std::string>();
    out.skippable[id - vocab_base] = special;
  }
}

}  // namespace

SpecialConfig read_tokenizer_config(const std::string& path, int32_t vocab_base) {
  std::string data = read_file(path);
  check_json_depth(data, path);
  json config = json::parse(data, nullptr, /*allow_exceptions=*/false);
  check(!config.is_discarded(), path, ": not valid JSON");
  check(config.is_object(), path, ": expected a JSON object at the top level");
  SpecialConfig out;
  out.names.resize(kNumSpecialTokens);
  out.skippable.assign(kNumSpecialTokens, true);
  if (config.contains("added_tokens_decoder")) {
    read_added_tokens(config["added_tokens_decoder"], path, vocab_base, out);
  }
  std::unordered_map<std::string, int32_t> id_of;
  for (int32_t i = 0; i < kNumSpecialTokens; ++i) {
    if (out.names[i].empty()) out.names[i] = cat("<|reserved_token_", vocab_base + i, "|>");
    auto [it, added] = id_of.emplace(out.names[i], vocab_base + i);
    check(added, path, ": special token text '", out.names[i], "' is used by ids ", it->second,
          " and ", vocab_base + i);
  }
  out.bos = token_name(config, "bos_token", path);
  out.eos = token_name(config, "eos_token", path);
  out.unk = token_name(config, "unk_token", path);
  out.pad = token_name(config, "pad_token", path);
  return out;
}

}  // namespace k3::tok
