// k3::BpeTrainer: pre-token counting, the merge loop (bpe_merges.h), and the two output files.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "k3/error.h"
#include "k3/tokenizer_train.h"
#include "tokenizer/chunks.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/utf8.h"
#include "tokenizer/vocab_files.h"
#include "train/bpe_merges.h"

namespace k3 {
namespace {

namespace fs = std::filesystem;

// K3's named special tokens (spec §10.2): offset above the ranks, text, HF "special" flag.
struct NamedSpecial {
  int32_t offset;
  const char* text;
  bool special;
};
constexpr NamedSpecial kNamedSpecials[] = {
    {0, "[BOS]", true},
    {1, "[EOS]", true},
    {2, "<|end_of_msg|>", true},
    {3, "<|open|>", false},
    {4, "<|close|>", false},
    {5, "<|sep|>", false},
    {6, "[start_header_id]", true},
    {7, "[end_header_id]", true},
    {9, "[EOT]", true},
    {18, "<|media_begin|>", true},
    {19, "<|media_content|>", true},
    {20, "<|media_end|>", true},
    {21, "<|media_pad|>", true},
    {65, "<osagent_mode>", true},
    {254, "[UNK]", true},
    {255, "[PAD]", true},
};

std::string base64(std::string_view bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t v = uint32_t(static_cast<unsigned char>(bytes[i])) << 16;
    if (i + 1 < bytes.size()) v |= uint32_t(static_cast<unsigned char>(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[v & 63] : '=';
  }
  return out;
}

nlohmann::ordered_json tokenizer_config(int32_t ranks) {
  nlohmann::ordered_json added = nlohmann::ordered_json::object();
  for (const NamedSpecial& s : kNamedSpecials) {
    added[std::to_string(ranks + s.offset)] = {{"content", s.text},    {"lstrip", false},
                                               {"normalized", false},  {"rstrip", false},
                                               {"single_word", false}, {"special", s.special}};
  }
  nlohmann::ordered_json c;
  c["added_tokens_decoder"] = added;
  c["additional_special_tokens"] = {"<|end_of_msg|>", "[start_header_id]", "[end_header_id]",
                                    "[EOT]",          "<|media_begin|>",   "<|media_content|>",
                                    "<|media_end|>",  "<|media_pad|>",     "<osagent_mode>"};
  c["bos_token"] = "[BOS]";
  c["eos_token"] = "[EOS]";
  c["unk_token"] = "[UNK]";
  c["pad_token"] = "[PAD]";
  c["model_max_length"] = 1048576;
  c["tokenizer_class"] = "TikTokenTokenizer";
  return c;
}

// Writes `text` to dir/name through dir/.tmp-name and a rename.
void write_atomically(const fs::path& dir, const std::string& name, const std::string& text) {
  const fs::path tmp = dir / (".tmp-" + name), final_path = dir / name;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    check(out.good(), "cannot write ", tmp.string());
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.close();
    check(out.good(), "error writing ", tmp.string(), " (disk full?)");
  }
  std::error_code ec;
  fs::rename(tmp, final_path, ec);
  check(!ec, "cannot rename ", tmp.string(), " to ", final_path.string(), ": ", ec.message());
}

// Lets word_count.find() take a string_view without building a std::string.
struct ViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view v) const { return std::hash<std::string_view>{}(v); }
};

}  // namespace

struct BpeTrainer::Impl {
  std::unordered_map<std::string, int64_t, ViewHash, std::equal_to<>> word_count;
  std::vector<std::string> tokens;
  std::vector<tok::Span> spans;
  std::vector<std::string_view> slices;
  BpeTrainStats stats;
  bool trained = false;

  // The same cuts as encode (slices, then runs of at most 25,000 characters), then the
  // pre-tokenizer: training sees the pieces encoding will see, and no piece is huge.
  void count_valid(std::string_view text) {
    slices.clear();
    tok::split_for_encode(text, slices);
    for (std::string_view slice : slices) count_slice(slice);
  }

  void count_slice(std::string_view text) {
    spans.clear();
    tok::pretokenize(text, spans);
    stats.pretokens += static_cast<int64_t>(spans.size());
    for (const tok::Span& s : spans) {
      const std::string_view piece = text.substr(s.begin, s.end - s.begin);
      auto it = word_count.find(piece);
      if (it == word_count.end()) {
        word_count.emplace(piece, 1);
      } else {
        ++it->second;
      }
    }
  }
};

BpeTrainer::BpeTrainer() : impl_(std::make_unique<Impl>()) {}
BpeTrainer::~BpeTrainer() = default;
BpeTrainer::BpeTrainer(BpeTrainer&&) noexcept = default;
BpeTrainer& BpeTrainer::operator=(BpeTrainer&&) noexcept = default;

void BpeTrainer::add_text(std::string_view text) {
  check(!impl_->trained, "BpeTrainer: add_text() after train()");
  impl_->stats.bytes += static_cast<int64_t>(text.size());
  // The pre-tokenizer indexes with 32-bit offsets: feed at most 1 GiB at a time, cut at a line.
  constexpr size_t kMaxChunk = size_t{1} << 30;
  while (!text.empty()) {
    const size_t bad = tok::find_invalid_utf8(text);
    std::string_view valid = text.substr(0, bad);
    while (valid.size() > kMaxChunk) {
      size_t cut = valid.rfind('\n', kMaxChunk);
      cut = cut == std::string_view::npos ? kMaxChunk : cut + 1;
      while (cut < valid.size() && (static_cast<unsigned char>(valid[cut]) & 0xC0) == 0x80) ++cut;
      impl_->count_valid(valid.substr(0, cut));
      valid.remove_prefix(cut);
    }
    if (!valid.empty()) impl_->count_valid(valid);
    if (bad == std::string_view::npos) break;
    ++impl_->stats.invalid_bytes;
    text.remove_prefix(bad + 1);
  }
}

BpeTrainStats BpeTrainer::train(const BpeTrainOptions& o) {
  check(!impl_->trained, "BpeTrainer: train() called twice");
  const int64_t base = o.vocab_size - tok::kNumSpecialTokens;
  check(base >= 256 && o.vocab_size <= (int64_t{1} << 30), "vocab size ", o.vocab_size,
        " is out of range: it must hold the 256 byte tokens and the 256 specials (at least 512)");
  check(o.min_frequency >= 1, "min frequency must be at least 1, found ", o.min_frequency);
  train::BpeWords words;
  words.symbols.reserve(impl_->word_count.size());
  std::vector<std::string> bytes = train::byte_tokens();
  int32_t byte_id[256];
  for (size_t i = 0; i < 256; ++i) byte_id[static_cast<unsigned char>(bytes[i][0])] = int32_t(i);
  for (const auto& [w, c] : impl_->word_count) {
    std::vector<int32_t> s(w.size());
    for (size_t i = 0; i < w.size(); ++i) s[i] = byte_id[static_cast<unsigned char>(w[i])];
    words.symbols.push_back(std::move(s));
    words.freq.push_back(c);
  }
  BpeTrainStats& st = impl_->stats;
  st.unique_words = static_cast<int64_t>(words.freq.size());
  impl_->word_count.clear();
  impl_->tokens = std::move(bytes);
  st.merges = train::learn_merges(words, impl_->tokens, base, o.min_frequency, o.progress);
  st.ranks = static_cast<int64_t>(impl_->tokens.size());
  st.vocab_size = st.ranks + tok::kNumSpecialTokens;
  for (size_t i = 0; i < words.freq.size(); ++i) {
    st.corpus_tokens += words.freq[i] * static_cast<int64_t>(words.symbols[i].size());
  }
  impl_->trained = true;
  return st;
}

const std::vector<std::string>& BpeTrainer::tokens() const { return impl_->tokens; }

void BpeTrainer::write(const std::string& dir) const {
  check(impl_->trained, "BpeTrainer: write() before train()");
  std::error_code ec;
  fs::create_directories(dir, ec);
  check(!ec && fs::is_directory(dir), "cannot create output directory ", dir,
        ec ? ": " + ec.message() : "");
  std::string model;
  for (size_t r = 0; r < impl_->tokens.size(); ++r) {
    model += base64(impl_->tokens[r]) + " " + std::to_string(r) + "\n";
  }
  const auto ranks = static_cast<int32_t>(impl_->tokens.size());
  write_atomically(dir, "tiktoken.model", model);
  write_atomically(dir, "tokenizer_config.json", tokenizer_config(ranks).dump(2) + "\n");
}

}  // namespace k3
