// k3 tokenize / k3 detokenize, run as a process: output formats, input sources, and one clear
// error (exit 1, no crash) per kind of bad input.
#include <gtest/gtest.h>

#include "tokenizer/fixture.h"

namespace k3::test {
namespace {

std::string ids_text(const std::vector<int32_t>& ids, const char* sep) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? sep : "") + std::to_string(ids[i]);
  return s;
}

const std::string kText = "Hello world<|end_of_msg|> 你好、世界 it's 😀";

TEST(Cli, TokenizePromptPrintsIds) {
  CliResult r = run_k3({"tokenize", "-m", fixture_dir(), "-p", kText});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, ids_text(fixture_tokenizer().encode(kText), " ") + "\n");
}

TEST(Cli, TokenizeJsonNoSpecialFromStdin) {
  CliResult r = run_k3({"tokenize", "-m", fixture_dir(), "--json", "--no-special"}, kText);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[" + ids_text(fixture_tokenizer().encode(kText, false), ",") + "]\n");
}

TEST(Cli, TokenizeFile) {
  TempDir dir;
  dir.write("in.txt", kText + "\r\n");
  CliResult r = run_k3({"tokenize", "-m", fixture_dir(), "-f", dir.path() + "/in.txt"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, ids_text(fixture_tokenizer().encode(kText + "\r\n"), " ") + "\n");
}

TEST(Cli, DetokenizeIdsAndStdinRoundTrip) {
  std::vector<int32_t> ids = fixture_tokenizer().encode(kText);
  CliResult r = run_k3({"detokenize", "-m", fixture_dir(), "--ids", ids_text(ids, ",")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, kText);
  r = run_k3({"detokenize", "-m", fixture_dir()}, "[" + ids_text(ids, ", ") + "]\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, kText);
  r = run_k3({"detokenize", "-m", fixture_dir(), "--json"}, ids_text(ids, "\n"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "\"Hello world<|end_of_msg|> 你好、世界 it's 😀\"\n");
}

void expect_clean_failure(const CliResult& r, const char* what) {
  EXPECT_EQ(r.exit_code, 1) << "stderr: " << r.err;  // 1 = reported error, not a crash/signal
  EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line expected: " << r.err;
}

TEST(Cli, MissingModelDirectory) {
  expect_clean_failure(run_k3({"tokenize", "-m", "/nonexistent/k3", "-p", "x"}),
                       "cannot open tokenizer file /nonexistent/k3/tiktoken.model");
  // Without -m the model comes from $K3_MODEL (then models/default): a bad one is named.
  expect_clean_failure(run_k3({"tokenize", "-p", "x"}, "", {{"K3_MODEL", "/nonexistent/k3"}}),
                       "K3_MODEL=/nonexistent/k3 is not a model directory");
}

// A model directory whose tiktoken.model is `model` (the config is valid).
CliResult tokenize_with_model(const std::string& model, const std::string& config = "{}") {
  TempDir dir;
  dir.write("tiktoken.model", model);
  dir.write("tokenizer_config.json", config);
  return run_k3({"tokenize", "-m", dir.path(), "-p", "x"});
}

TEST(Cli, MissingTokenizerConfig) {
  TempDir dir;
  dir.write("tiktoken.model", read_file_bytes(fixture_dir() + "/tiktoken.model"));
  expect_clean_failure(run_k3({"tokenize", "-m", dir.path(), "-p", "x"}),
                       "tokenizer_config.json: No such file or directory");
}

TEST(Cli, BadBase64) {
  expect_clean_failure(tokenize_with_model("IQ== 0\n!!!! 1\n"),
                       "tiktoken.model:2: bad base64 '!!!!': invalid character '!'");
}

TEST(Cli, NonContiguousRanks) {
  expect_clean_failure(tokenize_with_model("IQ== 0\nIg== 5\n"),
                       "tiktoken.model:2: rank 5 is out of range");
  expect_clean_failure(tokenize_with_model("IQ== 0\nIg== 0\n"),
                       "tiktoken.model:2: rank 0 already used on line 1");
}

TEST(Cli, DuplicateTokenBytes) {
  expect_clean_failure(tokenize_with_model("IQ== 0\nIQ== 1\n"),
                       "tiktoken.model:2: token bytes 'IQ==' duplicate line 1");
}

TEST(Cli, MalformedTokenizerConfig) {
  std::string model = read_file_bytes(fixture_dir() + "/tiktoken.model");
  expect_clean_failure(tokenize_with_model(model, "{\"added_tokens_decoder\": "),
                       "tokenizer_config.json: not valid JSON");
  expect_clean_failure(
      tokenize_with_model(model, R"({"added_tokens_decoder": {"3": {"content": "[X]"}}})"),
      "added_tokens_decoder id 3 is outside the special-token range 6260..6515");
}

TEST(Cli, IdBeyondVocabulary) {
  std::string n = std::to_string(fixture_tokenizer().n_vocab());
  expect_clean_failure(run_k3({"detokenize", "-m", fixture_dir(), "--ids", "1," + n}),
                       ("token id " + n + " (position 1) is outside the vocabulary").c_str());
  expect_clean_failure(run_k3({"detokenize", "-m", fixture_dir()}, "1 -2"), "token id -2");
  expect_clean_failure(run_k3({"detokenize", "-m", fixture_dir()}, "1 2x"), "is not a token id");
  expect_clean_failure(run_k3({"detokenize", "-m", fixture_dir(), "--ids", "99999999999999"}),
                       "out of range");
}

TEST(Cli, InvalidUtf8OnStdin) {
  expect_clean_failure(
      run_k3({"tokenize", "-m", fixture_dir()}, "ok \xF0\x9F\x98 no"),
      "not valid UTF-8: ill-formed sequence starting with byte 0xF0 at byte offset 3");
}

}  // namespace
}  // namespace k3::test
