// k3 run and k3 chat as users run them (the built binary), and one clear error per kind of
// bad input: exit 1, one line on stderr naming the problem, no crash.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "k3/generate.h"
#include "sample/util.h"

namespace k3 {
namespace {

using test::CliResult;
using test::run_k3;
using test::tiny_model_dir;

std::vector<std::string> run_args(std::vector<std::string> extra) {
  std::vector<std::string> a = {"run", "-m", tiny_model_dir()};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// The N of "prefill N tokens" in a timing line.
int prefill_count(const std::string& err) {
  const size_t at = err.find("prefill ");
  return at == std::string::npos ? -1 : std::stoi(err.substr(at + 8));
}

void expect_clean_failure(const CliResult& r, const std::string& what) {
  EXPECT_EQ(r.exit_code, 1) << "stderr: " << r.err;
  EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line expected: " << r.err;
}

TEST(CliRun, GreedyOutputEqualsTheLibraryAndEndsWithTimings) {
  CliResult r = run_k3(run_args({"-p", "Once upon a time", "-n", "10", "--temp", "0"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Session s(test::tiny_model(), test::tiny_tokenizer());
  GenerateResult lib = s.generate(test::tiny_tokenizer().encode("Once upon a time"),
                                  {.sampling = {.temperature = 0},
                                   .max_tokens = 10,
                                   .stop_ids = test::tiny_tokenizer().stop_ids()},
                                  {});
  EXPECT_EQ(r.out, lib.text);
  EXPECT_EQ(prefill_count(r.err),
            static_cast<int>(test::tiny_tokenizer().encode("Once upon a time").size()));
  EXPECT_NE(r.err.find("k3 run: prefill "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("decode 10 tokens in"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tok/s"), std::string::npos) << r.err;
}

TEST(CliRun, SeedFileStdinAndStop) {
  test::TempDir dir;
  const std::string file = dir.write("prompt.txt", "Once upon a time");
  CliResult a = run_k3(run_args({"-f", file, "-n", "12", "--seed", "9", "--top-k", "50"}));
  CliResult b = run_k3(run_args({"-n", "12", "-s", "9", "--top-k", "50"}), "Once upon a time");
  CliResult c =
      run_k3(run_args({"-p", "Once upon a time", "-n", "12", "--seed", "10", "--top-k", "50"}));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
  EXPECT_NE(a.err.find("seed 9"), std::string::npos) << a.err;
  // Stop at two ASCII characters from the middle of the output: it is cut before them.
  size_t at = a.out.size() / 2;
  while (at + 1 < a.out.size() && (a.out[at] & 0x80 || a.out[at + 1] & 0x80)) ++at;
  ASSERT_LT(at + 1, a.out.size()) << a.out;
  const std::string stop = a.out.substr(at, 2);
  CliResult d = run_k3(run_args({"-f", file, "-n", "12", "--seed", "9", "--top-k", "50", "--stop",
                                 "never-there", "--stop", stop}));
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_EQ(d.out, a.out.substr(0, a.out.find(stop)));
  EXPECT_NE(d.err.find("stop: stop string"), std::string::npos) << d.err;
}

TEST(CliRun, ChatFormatAndDefaultModelFromK3Model) {
  CliResult r =
      run_k3({"run", "--chat", "--system", "Be brief.", "-p", "Hi", "-n", "5", "--temp", "0"}, "",
             {{"K3_MODEL", tiny_model_dir()}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("decode 5 tokens"), std::string::npos) << r.err;
  // <|open|>message role="system"<|sep|>Be brief.<|close|>message<|sep|><|end_of_msg|>... is
  // much longer than the plain prompt.
  CliResult plain = run_k3(run_args({"-p", "Hi", "-n", "1"}));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_GT(prefill_count(r.err), prefill_count(plain.err) + 20) << r.err << plain.err;
}

TEST(CliRun, HelpListsTheLlamaCppFlags) {
  for (const char* cmd : {"run", "chat", "perplexity"}) {
    CliResult r = run_k3({cmd, "--help"});
    ASSERT_EQ(r.exit_code, 0) << cmd;
    EXPECT_NE(r.out.find("usage: k3 "), std::string::npos);
    EXPECT_NE(r.out.find("-m, --model DIR"), std::string::npos) << r.out;
  }
  CliResult r = run_k3({"run", "--help"});
  for (const char* flag :
       {"-p, --prompt", "-n, --n-predict", "-t, --threads", "-c, --ctx-size", "--temp", "--top-k",
        "--top-p", "--min-p", "--repeat-penalty", "--presence-penalty", "--frequency-penalty",
        "--seed", "--stop", "--chat", "--thinking", "--system", "-f, --file"}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
  }
}

TEST(CliBadInput, MissingOrMalformedTokenizerFiles) {
  test::TempDir dir;
  const std::string model = dir.path() + "/m";
  std::filesystem::copy(tiny_model_dir(), model);
  std::filesystem::remove(model + "/tiktoken.model");
  expect_clean_failure(run_k3({"run", "-m", model, "-p", "x"}),
                       "cannot open tokenizer file " + model + "/tiktoken.model");
  std::filesystem::copy_file(tiny_model_dir() + "/tiktoken.model", model + "/tiktoken.model");
  std::ofstream(model + "/tokenizer_config.json") << "{\"added_tokens_decoder\": {\"1\": 5}}";
  expect_clean_failure(run_k3({"run", "-m", model, "-p", "x"}), "tokenizer_config.json");
  expect_clean_failure(run_k3({"perplexity", "-m", model, "-f", "/dev/null"}),
                       "tokenizer_config.json");
}

TEST(CliBadInput, IdsBeyondTheVocabulary) {
  expect_clean_failure(run_k3(run_args({"--ids", "1,2,6516"})),
                       "prompt token id 6516 (position 2) is outside the vocabulary [0, 6516)");
  expect_clean_failure(run_k3(run_args({"--ids", "1,-2"})), "prompt token id -2");
  expect_clean_failure(run_k3(run_args({"--ids", "1,x"})), "is not a token id");
  expect_clean_failure(run_k3(run_args({"-p", "x", "--logit-bias", "12"})), "--logit-bias");
  // The tokenizer of a bigger vocabulary than the model's.
  test::TempDir dir;
  const std::string model = dir.path() + "/m";
  std::filesystem::copy(K3_SOURCE_DIR "/tests/data/models/c1_tiny", model);
  for (const char* f : {"tiktoken.model", "tokenizer_config.json"}) {
    std::filesystem::copy_file(test::tokenizer_dir() + "/" + f, model + "/" + f);
  }
  expect_clean_failure(run_k3({"run", "-m", model, "-p", "x"}),
                       "the tokenizer has 6516 token ids but the model's vocabulary");
}

TEST(CliBadInput, PromptLongerThanTheContext) {
  expect_clean_failure(run_k3(run_args({"-p", "one two three four five six", "-c", "3"})),
                       "more than the context limit of 3 tokens");
  expect_clean_failure(run_k3(run_args({"-p", "x", "-c", "0"})), "-c must be at least 1");
}

TEST(CliBadInput, InvalidUtf8OnStdin) {
  expect_clean_failure(run_k3(run_args({"-n", "2"}), "abc\xff\xfe"),
                       "standard input is not valid UTF-8: ill-formed byte 0xff at byte offset 3");
  expect_clean_failure(run_k3(run_args({"--chat", "-n", "2"}), "\xc3("),
                       "standard input is not valid UTF-8");
  expect_clean_failure(run_k3({"perplexity", "-m", tiny_model_dir()}, "ok \xed\xa0\x80"),
                       "standard input is not valid UTF-8");
}

TEST(CliBadInput, BadOptionValues) {
  expect_clean_failure(run_k3(run_args({"-p", "x", "--top-p", "0"})), "top_p must be in (0, 1]");
  expect_clean_failure(run_k3(run_args({"-p", "x", "--thinking", "maybe"})),
                       "--thinking must be 'on' or 'off'");
  expect_clean_failure(run_k3(run_args({"-p", "x", "-f", "/dev/null"})), "give the prompt one way");
  expect_clean_failure(run_k3({"perplexity", "-m", tiny_model_dir(), "--stride", "600"}, "a b c"),
                       "stride must be in [1, ctx = 512]");
  expect_clean_failure(run_k3({"perplexity", "-m", tiny_model_dir()}, "a"), "at least 2");
}

TEST(CliBadInput, NoDefaultModelSaysHowToMakeOne) {
  CliResult r = run_k3({"run", "-p", "x"}, "", {{"K3_MODEL", "/nonexistent/k3-model"}});
  expect_clean_failure(r, "K3_MODEL=/nonexistent/k3-model is not a model directory");
  EXPECT_NE(r.err.find("./scripts/quickstart.sh"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("k3 init --config configs/default.json -o models/default"),
            std::string::npos)
      << r.err;
}

TEST(CliChat, MultiTurnSaveLoadAndStateReuse) {
  test::TempDir dir;
  const std::string saved = dir.file("conv.json");
  // A logit bias on <|end_of_msg|> makes answers end on their own after a few tokens, so the
  // second turn can re-use the state of the first.
  const std::vector<std::string> args = {"chat",     "-m", tiny_model_dir(), "--seed", "3",
                                         "-n",       "30", "--logit-bias",   "6262+7", "--system",
                                         "Be brief."};
  CliResult r = run_k3(args, "Hello there\n/help\nHow are \\\nyou?\n/save " + saved + "\n/quit\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("/reset"), std::string::npos) << r.out;  // /help
  EXPECT_NE(r.out.find("[saved 5 messages to " + saved + "]"), std::string::npos) << r.out;
  auto conv = nlohmann::json::parse(test::read_file(saved));
  ASSERT_EQ(conv.size(), 5u) << conv.dump();
  EXPECT_EQ(conv[0]["role"], "system");
  EXPECT_EQ(conv[1]["content"], "Hello there");
  EXPECT_EQ(conv[2]["role"], "assistant");
  EXPECT_EQ(conv[3]["content"], "How are \nyou?");
  EXPECT_EQ(conv[4]["role"], "assistant");
  // Two answers, each with a stats line; the first ended at <|end_of_msg|>, so the second
  // prefilled only its own turn.
  const size_t first = r.err.find("re-used 0; stop: eos]");
  ASSERT_NE(first, std::string::npos) << r.err;
  const size_t second = r.err.find("re-used ", first + 10);
  ASSERT_NE(second, std::string::npos) << r.err;
  EXPECT_GT(std::stoi(r.err.substr(second + 8)), 20) << r.err;

  // /load then /reset; bad commands and files are reported and the chat goes on.
  r = run_k3(args, "/load " + saved + "\n/load /nonexistent.json\n/bogus\n/reset\nHi\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[loaded 5 messages from " + saved + "]"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("error: cannot open /nonexistent.json"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("error: unknown command '/bogus'"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("[new conversation]"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("stop: "), std::string::npos) << r.err;
}

TEST(CliChat, ContextOverflowIsReportedAndTheChatGoesOn) {
  std::string lines;
  for (int i = 0; i < 10; ++i) lines += "far too long for a context of eighty tokens ";
  lines += "\nHi\n";
  CliResult r = run_k3({"chat", "-m", tiny_model_dir(), "-c", "80", "-n", "2"}, lines);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("error: the prompt has"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("more than the context limit of 80 tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("stop: max tokens]"), std::string::npos) << r.err;  // "Hi" was answered
}

}  // namespace
}  // namespace k3

namespace k3 {
namespace {

void send(const test::SpawnedK3& c, const std::string& text) {
  ASSERT_EQ(write(c.in, text.data(), text.size()), static_cast<ssize_t>(text.size()));
}

// Waits until `path` holds more than `size` bytes (or 20 s pass).
bool wait_for_output(const std::string& path, size_t size) {
  for (int i = 0; i < 2000; ++i) {
    std::error_code ec;
    if (std::filesystem::file_size(path, ec) > size && !ec) return true;
    usleep(10000);
  }
  return false;
}

int wait_exit(const test::SpawnedK3& c) {
  close(c.in);
  int status = 0;
  waitpid(c.pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(CliChat, CtrlCStopsTheAnswerNotTheProgramAndAtThePromptLeaves) {
  test::TempDir dir;
  const std::string out = dir.file("out"), err = dir.file("err"), saved = dir.file("c.json");
  test::SpawnedK3 c = test::spawn_k3(
      {"chat", "-m", tiny_model_dir(), "--ignore-eos", "-c", "4096", "-t", "1"}, out, err);
  send(c, "Tell me a very long story\n");
  ASSERT_TRUE(wait_for_output(out, 0)) << "no answer started";
  kill(c.pid, SIGINT);  // during the answer: stops it
  ASSERT_TRUE(wait_for_output(err, 0)) << "no stats line after Ctrl-C";
  send(c, "/save " + saved + "\n");
  for (int i = 0; i < 500 && !std::filesystem::exists(saved); ++i) usleep(10000);
  kill(c.pid, SIGINT);  // at the prompt: leaves
  EXPECT_EQ(wait_exit(c), 0);
  const std::string e = test::read_file(err);
  EXPECT_NE(e.find("stop: cancelled]"), std::string::npos) << e;
  auto conv = nlohmann::json::parse(test::read_file(saved));
  ASSERT_EQ(conv.size(), 2u) << conv.dump();
  EXPECT_EQ(conv[1]["role"], "assistant");
}

}  // namespace
}  // namespace k3

namespace k3 {
namespace {

// Statistics never glue onto the generated text when stdout and stderr share a destination
// (one file here, as `2>&1 | tee` would), and a context the model cannot address is refused.
TEST(CliRun, StatisticsOnTheirOwnLineAndContextWithinTheModel) {
  const std::string m = test::tiny_model_dir();
  test::TempDir dir;
  const std::string both = dir.file("both.txt");
  const std::string cmd = test::shell_quote(K3_CLI_PATH) + " run -m " + test::shell_quote(m) +
                          " -p Hello -n 6 --seed 3 --ignore-eos >" + test::shell_quote(both) +
                          " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const std::string text = test::read_file_bytes(both);
  const size_t at = text.find("k3 run: prefill");
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_TRUE(at == 0 || text[at - 1] == '\n') << text;

  const test::CliResult r =
      test::run_k3({"run", "-m", m, "-p", "Hello", "-n", "2", "-c", "99999999"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("-c 99999999 exceeds the model's max_position_embeddings (4096)"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace k3
