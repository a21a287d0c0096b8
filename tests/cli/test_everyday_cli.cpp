// The everyday-use conventions every `k3` command shares: one way to name a model (-m DIR or a
// file in it, $K3_MODEL, models/default), one option table (spellings, ranges, "-n2"), help,
// version and "did you mean", and messages (plurals, no doubled prefixes).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "common/cli_harness.h"

namespace k3::test {
namespace {
namespace fs = std::filesystem;

const std::string kTiny = K3_SOURCE_DIR "/tests/data/models/c1_tiny";

// c1_tiny (vocab 256) with the project tokenizer: enough for tokenize and option checks.
const std::string& model_with_tokenizer() {
  static const TempDir dir;
  static const std::string path = [] {
    const std::string m = dir.file("model");
    fs::copy(kTiny, m);
    for (const char* f : {"tiktoken.model", "tokenizer_config.json"}) {
      fs::copy_file(K3_SOURCE_DIR "/tests/data/tokenizer/" + std::string(f), m + "/" + f);
    }
    return m;
  }();
  return path;
}

void expect_error(const CliResult& r, const std::string& what, int code = 1) {
  EXPECT_EQ(r.exit_code, code) << r.err;
  EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line expected: " << r.err;
}

// Point 1: -m, else $K3_MODEL, else models/default; -m may name a file in the directory.
TEST(EverydayModel, K3ModelAndFilesInTheModelDirectory) {
  const std::string m = model_with_tokenizer();
  CliResult r = run_k3({"tokenize", "-p", "Hello world"}, "", {{"K3_MODEL", m}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string ids = r.out;
  EXPECT_FALSE(ids.empty());
  for (const char* f :
       {"config.json", "model.safetensors.index.json", "model-00001-of-000001.safetensors"}) {
    r = run_k3({"tokenize", "-m", m + "/" + f, "-p", "Hello world"});
    ASSERT_EQ(r.exit_code, 0) << f << ": " << r.err;
    EXPECT_EQ(r.out, ids) << f;
  }
  // K3_MODEL may name a file too; inspect, bench and logits resolve the same way.
  r = run_k3({"inspect"}, "", {{"K3_MODEL", m + "/config.json"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("vocab 256"), std::string::npos) << r.out;
  r = run_k3({"inspect", "-m", kTiny + "/config.json", "--ctx", "8"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_k3({"logits", "--ids", "5,6", "-o", m + "/../l.npy"}, "", {{"K3_MODEL", kTiny}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

TEST(EverydayModel, NotAModelDirectoryIsOneLineNamingThePath) {
  for (const char* cmd : {"run", "chat", "perplexity", "inspect", "bench", "logits"}) {
    expect_error(run_k3({cmd, "-m", "/nonexistent"}),
                 std::string("k3 ") + cmd +
                     ": error: /nonexistent is not a model directory (no config.json; the "
                     "path does not exist)");
  }
  expect_error(run_k3({"inspect", "-m", K3_SOURCE_DIR "/README.md"}),
               K3_SOURCE_DIR "/README.md is not a model directory (no config.json)");
}

// Point 2: the same spellings and range checks everywhere; -n2; options without effect.
TEST(EverydayOptions, RangesAttachedValuesAndUselessOptions) {
  const std::string m = model_with_tokenizer();
  expect_error(run_k3({"run", "-m", m, "-p", "x", "-t", "0"}), "-t must be in 1..1024, got 0");
  expect_error(run_k3({"bench", "-m", kTiny, "--threads", "1025"}),
               "--threads must be in 1..1024, got 1025");
  expect_error(run_k3({"perplexity", "-m", m, "--stride", "0"}, "a b c"),
               "--stride must be at least 1, got 0");
  expect_error(run_k3({"logits", "-m", kTiny, "--ids", "1", "--chunk", "0", "-o", "/dev/null"}),
               "--chunk must be at least 1, got 0");
  expect_error(run_k3({"run", "-m", m, "-p", "x", "-n", "-2"}), "-n must be at least -1, got -2");
  expect_error(run_k3({"perplexity", "-m", m, "-t", "x"}, "a b c"),
               "option -t: expected an integer, found 'x'");
  // -c/--ctx-size everywhere, --ctx kept as an alias.
  for (const char* c : {"-c", "--ctx-size", "--ctx"}) {
    expect_error(run_k3({"inspect", "-m", kTiny, c, "0"}),
                 std::string(c) + " must be at least 1, got 0");
  }
  // A value attached to a short option.
  CliResult r = run_k3({"bench", "-m", kTiny, "-p4", "-n2", "-r1", "-t1", "-s3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| tg2 |"), std::string::npos) << r.out;
  // Options that do nothing without --chat.
  expect_error(run_k3({"run", "-m", m, "-p", "x", "--system", "Be brief."}),
               "k3 run: error: --system has no effect without --chat");
  expect_error(run_k3({"run", "-m", m, "-p", "x", "--raw"}), "--raw has no effect without --chat");
  expect_error(run_k3({"run", "-m", m, "-p", "x", "--thinking", "on"}),
               "--thinking has no effect without --chat");
}

// Point 3: help, version, did you mean.
TEST(EverydayHelp, HelpVersionAndSuggestions) {
  CliResult help = run_k3({"help"});
  ASSERT_EQ(help.exit_code, 0);
  EXPECT_EQ(help.out, run_k3({"--help"}).out);
  const size_t run = help.out.find("  run "), chat = help.out.find("  chat "),
               ppl = help.out.find("  perplexity "), dev = help.out.find("developer tools:"),
               logits = help.out.find("  logits ");
  ASSERT_NE(run, std::string::npos) << help.out;
  EXPECT_LT(run, chat);
  EXPECT_LT(chat, ppl);
  EXPECT_LT(ppl, dev);
  EXPECT_LT(dev, logits);
  CliResult h = run_k3({"help", "run"});
  ASSERT_EQ(h.exit_code, 0);
  EXPECT_NE(h.out.find("usage: k3 run"), std::string::npos) << h.out;

  for (const char* v : {"--version", "version"}) {
    CliResult r = run_k3({v});
    ASSERT_EQ(r.exit_code, 0) << v;
    EXPECT_EQ(r.out.rfind("k3.cpp ", 0), 0u) << r.out;
  }
  expect_error(run_k3({"runn"}), "k3: unknown command 'runn'; did you mean 'run'?", 2);
  expect_error(run_k3({"perplexty"}), "did you mean 'perplexity'?", 2);
  expect_error(run_k3({"frobnicate"}), "k3: unknown command 'frobnicate' (see k3 help)", 2);
  expect_error(run_k3({"run", "--threds", "2"}),
               "k3 run: error: unknown option '--threds'; did you mean '--threads'?");
  expect_error(run_k3({"inspect", "--ctx-siz", "2"}), "did you mean '--ctx-size'?");
}

// Point 4: plurals, and library messages without a doubled "perplexity: " prefix.
TEST(EverydayMessages, PluralsAndNoDoubledPrefix) {
  const std::string m = model_with_tokenizer();
  CliResult r = run_k3({"perplexity", "-m", m, "--stride", "600"}, "a b c");
  expect_error(r, "k3 perplexity: error: the stride must be in [1, ctx = 512]");
  EXPECT_EQ(r.err.find("perplexity: the"), std::string::npos) << r.err;

  r = run_k3({"bench", "-m", kTiny, "-p", "1", "-n", "1", "-r", "1", "-t", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("1 repeat each\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("1 repeats"), std::string::npos) << r.out;

  r = run_k3({"inspect", "-m", kTiny, "-c", "1"});  // KKKM: one MLA layer
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(" x 1 layer)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("expected peak memory at 1 token,"), std::string::npos) << r.out;

  TempDir dir;
  r = run_k3({"logits", "-m", kTiny, "--ids", "5", "-o", dir.file("l.npy")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("k3 logits: 1 sequence, 1 token in 1 step in "), std::string::npos) << r.err;
}

}  // namespace
}  // namespace k3::test
