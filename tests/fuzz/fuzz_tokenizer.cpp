// The tokenizer on arbitrary bytes, with the committed fixture vocabulary. Properties:
//  - valid UTF-8 text: decode(encode(text)) == text (specials allowed or not), and decoding the
//    ids one at a time with StreamDecoder gives the same text;
//  - the bytes read as token ids: decode() is valid UTF-8, equals the streamed decode, and no
//    streamed piece ends inside a character.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz/fuzz_common.h"
#include "k3/error.h"
#include "k3/tokenizer.h"

namespace {

using k3::fuzz::require;

std::string streamed(const k3::Tokenizer& tok, const std::vector<int32_t>& ids) {
  k3::StreamDecoder dec(tok);
  std::string out;
  for (int32_t id : ids) {
    const std::string piece = dec.push(id);
    require(k3::find_invalid_utf8(piece) == std::string_view::npos, "streamed piece is UTF-8");
    out += piece;
  }
  return out + dec.finish();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const k3::Tokenizer tok = k3::Tokenizer::load(k3::fuzz::tokenizer_dir());
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (k3::find_invalid_utf8(text) == std::string_view::npos) {
    for (bool specials : {true, false}) {
      const std::vector<int32_t> ids = tok.encode(text, specials);
      require(tok.decode(ids) == text, "decode(encode(text)) == text");
      require(streamed(tok, ids) == text, "streamed decode == text");
    }
  } else {
    try {
      tok.encode(text);
      require(false, "encode rejects ill-formed UTF-8");
    } catch (const k3::Error&) {
    }
  }
  std::vector<int32_t> ids(size / 4);
  if (!ids.empty()) std::memcpy(ids.data(), data, ids.size() * 4);
  for (int32_t& id : ids) id = static_cast<int32_t>(static_cast<uint32_t>(id) % tok.n_vocab());
  const std::string whole = tok.decode(ids);
  require(k3::find_invalid_utf8(whole) == std::string_view::npos, "decode is valid UTF-8");
  require(streamed(tok, ids) == whole, "streamed decode == whole decode");
  return 0;
}
