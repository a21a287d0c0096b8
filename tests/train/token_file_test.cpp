// Pre-tokenised training data (.k3tok): a token file gives k3 train the same stream as its text;
// a file of another tokenizer, a truncated file and out-of-range ids are errors naming the file.
#include "k3/token_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/cli_harness.h"
#include "k3/error.h"
#include "train/train_data.h"

namespace k3::train {
namespace {

const std::string kTok = K3_SOURCE_DIR "/tests/data/tokenizer";
const std::string kText =
    "Pre-tokenised text, with a non-ASCII word (naïve) and <|end_of_msg|> as plain text.\n";

TEST(TokenFile, GivesTheSameStreamAsItsText) {
  test::TempDir dir;
  const Tokenizer tok = Tokenizer::load(kTok);
  const std::string txt = dir.write("a.txt", kText);
  const std::string bin = dir.file("a.k3tok");
  write_token_file(bin, tok, tok.encode(kText, false));
  EXPECT_TRUE(is_token_file(bin));
  EXPECT_FALSE(is_token_file(txt));
  const TokenStream a = tokenize_files(tok, {txt, txt}, tok.n_vocab());
  const TokenStream b = tokenize_files(tok, {bin, txt}, tok.n_vocab());
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.bytes, b.bytes);
}

TEST(TokenFile, TheCliWritesWhatTrainingReads) {
  test::TempDir dir;
  const std::string txt = dir.write("b.txt", kText), bin = dir.file("b.k3tok");
  const test::CliResult r = test::run_k3({"tokenize", "-m", kTok, "-f", txt, "-o", bin});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("wrote " + bin), std::string::npos) << r.err;
  const Tokenizer tok = Tokenizer::load(kTok);
  EXPECT_EQ(read_token_file(bin, tok), tok.encode(kText, false));
}

TEST(TokenFile, BadFilesAreErrorsNamingThem) {
  test::TempDir dir;
  const Tokenizer tok = Tokenizer::load(kTok);
  const std::string bin = dir.file("c.k3tok");
  write_token_file(bin, tok, tok.encode(kText, false));
  auto expect_error = [](auto&& fn, const std::string& what) {
    try {
      fn();
      ADD_FAILURE() << "no error; expected: " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  // Truncated: the header promises more ids than the file holds.
  std::filesystem::resize_file(bin, std::filesystem::file_size(bin) - 3);
  expect_error([&] { read_token_file(bin, tok); }, "truncated or corrupt");
  // Another tokenizer: a different piece set changes the fingerprint.
  write_token_file(bin, tok, tok.encode(kText, false));
  std::string bytes;
  {
    std::ifstream f(bin, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  bytes[16] ^= 1;  // the fingerprint's lowest byte
  std::ofstream(bin, std::ios::binary) << bytes;
  expect_error([&] { read_token_file(bin, tok); }, "another tokenizer");
  // An id outside the tokenizer, on writing.
  const std::vector<int32_t> bad = {1, tok.n_vocab()};
  expect_error([&] { write_token_file(dir.file("d.k3tok"), tok, bad); }, "outside the tokenizer");
  EXPECT_FALSE(std::filesystem::exists(dir.file("d.k3tok")));
  // A file that is not a token file at all.
  expect_error([&] { read_token_file(dir.write("e.txt", "text"), tok); }, "not a k3 token file");
}

}  // namespace
}  // namespace k3::train
