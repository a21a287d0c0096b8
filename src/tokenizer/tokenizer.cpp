#include "k3/tokenizer.h"

#include <cstdio>

#include "core/error.h"
#include "tokenizer/bpe.h"
#include "tokenizer/chunks.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/special_matcher.h"
#include "tokenizer/utf8.h"
#include "tokenizer/vocab_files.h"

namespace k3 {

struct Tokenizer::Impl {
  tok::RankTable ranks;
  tok::SpecialConfig specials;
  tok::SpecialMatcher matcher;
  SpecialIds ids;

  int32_t base() const { return ranks.size(); }
  void encode_ordinary(std::string_view text, std::vector<int32_t>& out,
                       std::vector<tok::Span>& scratch) const;
  void encode_piece(std::string_view text, bool allow_special, std::vector<int32_t>& out,
                    std::vector<tok::Span>& scratch) const;
};

namespace {

int32_t id_of(const tok::SpecialMatcher& matcher, const std::string& name, int32_t base) {
  if (name.empty()) return -1;
  int32_t index = matcher.index_of(name);
  return index < 0 ? -1 : base + index;
}

std::string hex_byte(unsigned char b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", b);
  return buf;
}

}  // namespace

Tokenizer Tokenizer::load(const std::string& model_dir) {
  return load_files(model_dir + "/tiktoken.model", model_dir + "/tokenizer_config.json");
}

Tokenizer Tokenizer::load_files(const std::string& tiktoken_model_path,
                                const std::string& tokenizer_config_path) {
  auto impl = std::make_shared<Impl>();
  impl->ranks = tok::RankTable(tok::read_tiktoken_model(tiktoken_model_path));
  impl->specials = tok::read_tokenizer_config(tokenizer_config_path, impl->base());
  impl->matcher = tok::SpecialMatcher(impl->specials.names);
  const int32_t base = impl->base();
  impl->ids.bos = id_of(impl->matcher, impl->specials.bos, base);
  impl->ids.eos = id_of(impl->matcher, "<|end_of_msg|>", base);
  impl->ids.config_eos = id_of(impl->matcher, impl->specials.eos, base);
  impl->ids.unk = id_of(impl->matcher, impl->specials.unk, base);
  impl->ids.pad = id_of(impl->matcher, impl->specials.pad, base);
  return Tokenizer(std::move(impl));
}

void Tokenizer::Impl::encode_ordinary(std::string_view text, std::vector<int32_t>& out,
                                      std::vector<tok::Span>& scratch) const {
  scratch.clear();
  tok::pretokenize(text, scratch);
  for (const tok::Span& s : scratch) {
    tok::bpe_encode(ranks, text.substr(s.begin, s.end - s.begin), out);
  }
}

void Tokenizer::Impl::encode_piece(std::string_view text, bool allow_special,
                                   std::vector<int32_t>& out,
                                   std::vector<tok::Span>& scratch) const {
  size_t pos = 0;
  while (allow_special) {
    tok::SpecialMatcher::Match m = matcher.find(text, pos);
    if (m.pos == std::string_view::npos) break;
    encode_ordinary(text.substr(pos, m.pos - pos), out, scratch);
    out.push_back(base() + m.index);
    pos = m.pos + m.len;
  }
  encode_ordinary(text.substr(pos), out, scratch);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool allow_special) const {
  size_t bad = tok::find_invalid_utf8(text);
  if (bad != std::string_view::npos) {
    fail("tokenizer: the text is not valid UTF-8: ill-formed sequence starting with byte ",
         hex_byte(static_cast<unsigned char>(text[bad])), " at byte offset ", bad);
  }
  std::vector<std::string_view> pieces;
  tok::split_for_encode(text, pieces);
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 16);
  std::vector<tok::Span> scratch;
  for (std::string_view piece : pieces) impl_->encode_piece(piece, allow_special, out, scratch);
  return out;
}

std::string_view Tokenizer::token_to_piece(int32_t id) const {
  check(id >= 0 && id < n_vocab(), "tokenizer: token id ", id, " is outside the vocabulary 0..",
        n_vocab() - 1);
  if (id < impl_->base()) return impl_->ranks.bytes(id);
  return impl_->specials.names[id - impl_->base()];
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string bytes;
  for (int32_t id : ids) bytes += token_to_piece(id);
  return tok::utf8_replace_invalid(bytes);
}

int32_t Tokenizer::n_vocab() const { return impl_->base() + tok::kNumSpecialTokens; }
int32_t Tokenizer::vocab_base() const { return impl_->base(); }

bool Tokenizer::is_special(int32_t id) const { return id >= impl_->base() && id < n_vocab(); }

bool Tokenizer::is_skippable_special(int32_t id) const {
  return is_special(id) && impl_->specials.skippable[id - impl_->base()];
}

int32_t Tokenizer::special_id(std::string_view name) const {
  int32_t index = impl_->matcher.index_of(name);
  return index < 0 ? -1 : impl_->base() + index;
}

const SpecialIds& Tokenizer::special_ids() const { return impl_->ids; }

std::vector<int32_t> Tokenizer::stop_ids() const {
  std::vector<int32_t> out;
  if (impl_->ids.eos >= 0) out.push_back(impl_->ids.eos);
  if (impl_->ids.config_eos >= 0 && impl_->ids.config_eos != impl_->ids.eos) {
    out.push_back(impl_->ids.config_eos);
  }
  return out;
}

struct StreamDecoder::State {
  Tokenizer tokenizer;
  tok::Utf8Stream stream;
};

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer)
    : state_(std::make_unique<State>(State{tokenizer, {}})) {}
StreamDecoder::~StreamDecoder() = default;
StreamDecoder::StreamDecoder(StreamDecoder&&) noexcept = default;
StreamDecoder& StreamDecoder::operator=(StreamDecoder&&) noexcept = default;

std::string StreamDecoder::push(int32_t id) {
  return state_->stream.push(state_->tokenizer.token_to_piece(id));
}

std::string StreamDecoder::finish() { return state_->stream.finish(); }

}  // namespace k3
