// k3's tokenizer: bit-exact with K3's Hugging Face tokenizer (tiktoken rank-BPE + K3's
// pre-tokenizer regex + 256 special tokens), spec §10.1–§10.4. No CLI, JSON or I/O types here.
//
//   k3::Tokenizer tok = k3::Tokenizer::load("/models/kimi-k3");   // tiktoken.model + config
//   std::vector<int32_t> ids = tok.encode("Hello world");          // specials allowed
//   std::string text = tok.decode(ids);
//
// Encoding follows K3's `encode`: the text is cut into slices of at most 400,000 code points,
// each slice is cut wherever a run of whitespace (Python str.isspace) or of non-whitespace would
// pass 25,000 code points, and each piece is encoded on its own. With specials allowed, any exact
// special-token text (e.g. "<|end_of_msg|>") becomes its id; otherwise it is ordinary text.
//
// encode() takes valid UTF-8 only and throws k3::Error naming the byte offset of the first
// ill-formed byte (tiktoken takes a Python str, so such bytes cannot reach it). decode() accepts
// any ids in [0, n_vocab) and replaces ill-formed UTF-8 with U+FFFD as tiktoken's decode does.
// Objects are immutable after load and safe to share between threads; copies are cheap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace k3 {

// Special ids resolved by name; -1 where the name is not a special token.
struct SpecialIds {
  int32_t bos = -1;         // tokenizer_config bos_token ("[BOS]"); never prepended by chat
  int32_t eos = -1;         // "<|end_of_msg|>": what the model emits at the end of a turn
  int32_t config_eos = -1;  // tokenizer_config eos_token ("[EOS]"), which chat never emits
  int32_t unk = -1;         // unk_token ("[UNK]")
  int32_t pad = -1;         // pad_token ("[PAD]")
};

class Tokenizer {
 public:
  // Reads DIR/tiktoken.model and DIR/tokenizer_config.json.
  static Tokenizer load(const std::string& model_dir);
  static Tokenizer load_files(const std::string& tiktoken_model_path,
                              const std::string& tokenizer_config_path);

  std::vector<int32_t> encode(std::string_view text, bool allow_special = true) const;
  // Concatenated token bytes, decoded as UTF-8 with replacement. Throws on an id out of range.
  std::string decode(std::span<const int32_t> ids) const;
  // The raw bytes of one token (a special token's text for a special id); may be partial UTF-8.
  std::string_view token_to_piece(int32_t id) const;

  int32_t n_vocab() const;            // vocab_base() + 256
  int32_t vocab_base() const;         // number of ranks in tiktoken.model = first special id
  bool is_special(int32_t id) const;  // one of the 256 ids from vocab_base() on
  // HF's "special" flag of a special id (false for <|open|>, <|close|>, <|sep|>): what
  // skip_special_tokens would drop.
  bool is_skippable_special(int32_t id) const;
  int32_t special_id(std::string_view name) const;  // -1 when not a special token's text
  const SpecialIds& special_ids() const;
  std::vector<int32_t> stop_ids() const;  // eos and config_eos, those that exist

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// Byte offset of the first byte of `text` that does not belong to well-formed UTF-8 (overlong
// forms, surrogates and code points above U+10FFFF are ill-formed: what encode() rejects), or
// std::string_view::npos when `text` is valid.
size_t find_invalid_utf8(std::string_view text);

// Turns ids into text one token at a time without ever returning half a UTF-8 character: a
// character split across tokens comes out whole with the token that completes it. The
// concatenation of all push() results and finish() equals tokenizer.decode(all ids).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer);
  ~StreamDecoder();
  StreamDecoder(StreamDecoder&&) noexcept;
  StreamDecoder& operator=(StreamDecoder&&) noexcept;

  std::string push(int32_t id);  // throws k3::Error on an id out of range
  std::string finish();          // an incomplete trailing character becomes U+FFFD

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace k3
