// Malformed tokenizer files: each gives one k3::Error that names the file and the fault.
#include <gtest/gtest.h>

#include "core/error.h"
#include "tokenizer/fixture.h"
#include "tokenizer/vocab_files.h"

namespace k3::test {
namespace {

std::string b64(const std::string& in) {
  static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < in.size(); i += 3) {
    uint32_t w = uint32_t(static_cast<unsigned char>(in[i])) << 16;
    if (i + 1 < in.size()) w |= uint32_t(static_cast<unsigned char>(in[i + 1])) << 8;
    if (i + 2 < in.size()) w |= static_cast<unsigned char>(in[i + 2]);
    out += a[w >> 18];
    out += a[(w >> 12) & 63];
    out += i + 1 < in.size() ? a[(w >> 6) & 63] : '=';
    out += i + 2 < in.size() ? a[w & 63] : '=';
  }
  return out;
}

// A valid tiktoken.model: the 256 single bytes, then `extra` lines.
std::string byte_vocab(const std::string& extra = "") {
  std::string s;
  for (int b = 0; b < 256; ++b)
    s += b64(std::string(1, static_cast<char>(b))) + " " + std::to_string(b) + "\n";
  return s + extra;
}

const char* kConfig = R"({"added_tokens_decoder": {"257": {"content": "[EOS]", "special": true}},
                         "bos_token": "[BOS]", "eos_token": "[EOS]"})";

// Loads a model dir with the given files and returns the error message ("" when it loads).
std::string load_error(const std::string& model, const std::string& config) {
  TempDir dir;
  if (!model.empty()) dir.write("tiktoken.model", model);
  if (!config.empty()) dir.write("tokenizer_config.json", config);
  try {
    Tokenizer::load(dir.path());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_error(const std::string& msg, std::initializer_list<const char*> parts) {
  ASSERT_FALSE(msg.empty()) << "expected a load error";
  for (const char* p : parts) EXPECT_NE(msg.find(p), std::string::npos) << msg << "\nlacks: " << p;
}

TEST(VocabFiles, ValidMinimalModelLoads) {
  EXPECT_EQ(load_error(byte_vocab(b64("ab") + " 256\n"), kConfig), "");
  TempDir dir;
  dir.write("tiktoken.model", byte_vocab(b64("ab") + " 256\r\n\n"));  // CRLF, blank line
  dir.write("tokenizer_config.json", kConfig);
  Tokenizer tok = Tokenizer::load(dir.path());
  EXPECT_EQ(tok.vocab_base(), 257);
  EXPECT_EQ(tok.n_vocab(), 513);
  EXPECT_EQ(tok.special_ids().config_eos, 257);
  EXPECT_EQ(tok.special_ids().bos, -1);  // "[BOS]" is not among this config's specials
  EXPECT_EQ(tok.encode("ab"), (std::vector<int32_t>{256}));
}

TEST(VocabFiles, MissingFiles) {
  expect_error(load_error("", kConfig), {"cannot open tokenizer file", "tiktoken.model"});
  expect_error(load_error(byte_vocab(), ""), {"cannot open", "tokenizer_config.json"});
}

TEST(VocabFiles, BadBase64) {
  expect_error(load_error(byte_vocab("YW*i 256\n"), kConfig),
               {"tiktoken.model:257", "bad base64", "invalid character '*'"});
  expect_error(load_error(byte_vocab("YWJ 256\n"), kConfig),
               {"tiktoken.model:257", "bad base64", "multiple of 4"});
  expect_error(load_error(byte_vocab("Y=Jj 256\n"), kConfig), {"bad base64"});
}

TEST(VocabFiles, MalformedLines) {
  expect_error(load_error(byte_vocab("YWJj\n"), kConfig),
               {"tiktoken.model:257", "expected '<base64 token bytes> <rank>'"});
  expect_error(load_error(byte_vocab("YWJj 256 7\n"), kConfig), {"tiktoken.model:257"});
  expect_error(load_error(byte_vocab("YWJj x1\n"), kConfig), {"rank 'x1' is not"});
  expect_error(load_error(byte_vocab("YWJj -3\n"), kConfig), {"rank '-3' is not"});
  expect_error(load_error("\n\n", kConfig), {"tiktoken.model", "no tokens"});
}

TEST(VocabFiles, NonContiguousRanks) {
  expect_error(load_error(byte_vocab("YWJj 300\n"), kConfig),
               {"tiktoken.model:257", "rank 300 is out of range", "0..256"});
  expect_error(load_error(byte_vocab("YWJj 7\n"), kConfig),
               {"tiktoken.model:257", "rank 7 already used on line 8"});
}

TEST(VocabFiles, DuplicateBytes) {
  expect_error(load_error(byte_vocab(b64("a") + " 256\n"), kConfig),
               {"tiktoken.model:257", "duplicate line 98"});
}

TEST(VocabFiles, MissingSingleByte) {
  std::string model = byte_vocab();
  model.replace(model.find(b64("A") + " 65\n"), (b64("A") + " 65\n").size(), b64("AB") + " 65\n");
  expect_error(load_error(model, kConfig), {"no token for the single byte 0x41"});
}

TEST(VocabFiles, BadTokenizerConfig) {
  expect_error(load_error(byte_vocab(), "{not json"), {"tokenizer_config.json", "not valid JSON"});
  expect_error(load_error(byte_vocab(), "[1]"), {"tokenizer_config.json", "JSON object"});
  expect_error(load_error(byte_vocab(), R"({"added_tokens_decoder": {"5": {"content": "x"}}})"),
               {"added_tokens_decoder id 5 is outside the special-token range 256..511"});
  expect_error(load_error(byte_vocab(), R"({"added_tokens_decoder": {"256": {"special": true}}})"),
               {"added_tokens_decoder[\"256\"]", "content"});
  expect_error(load_error(byte_vocab(), R"({"added_tokens_decoder": {"abc": {"content": "x"}}})"),
               {"key \"abc\" is not a token id"});
  expect_error(load_error(byte_vocab(), R"({"added_tokens_decoder": {"256": {"content": "x"},
                                                                    "300": {"content": "x"}}})"),
               {"special token text 'x' is used by ids 256 and 300"});
  expect_error(load_error(byte_vocab(), R"({"added_tokens_decoder": {"256":
                                            {"content": "<|reserved_token_257|>"}}})"),
               {"'<|reserved_token_257|>' is used by ids 256 and 257"});
  expect_error(load_error(byte_vocab(), R"({"bos_token": 3})"), {"bos_token must be a string"});
}

TEST(VocabFiles, Base64DecoderIsStrict) {
  std::string out, why;
  EXPECT_TRUE(tok::base64_decode("YWJj", &out, &why));
  EXPECT_EQ(out, "abc");
  EXPECT_TRUE(tok::base64_decode("YQ==", &out, &why));
  EXPECT_EQ(out, "a");
  EXPECT_TRUE(tok::base64_decode("YWI=", &out, &why));
  EXPECT_EQ(out, "ab");
  EXPECT_FALSE(tok::base64_decode("YQ=", &out, &why));
  EXPECT_FALSE(tok::base64_decode("Y===", &out, &why));
  EXPECT_FALSE(tok::base64_decode("YQ==YQ==", &out, &why));
  EXPECT_FALSE(tok::base64_decode("YW-j", &out, &why));
}

}  // namespace
}  // namespace k3::test
