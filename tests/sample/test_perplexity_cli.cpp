// `k3 perplexity` output: the text summary, --json (parsed, against the text and the library),
// the running per-window values on stderr, and the refusal to wait on a terminal with no text.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <regex>

#include "k3/perplexity.h"
#include "sample/util.h"

namespace k3 {
namespace {

using nlohmann::json;

const std::string kText =
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the "
    "age of foolishness, it was the epoch of belief, it was the epoch of incredulity.";

test::CliResult run_perplexity(const std::string& file, std::vector<std::string> extra = {}) {
  std::vector<std::string> a = {
      "perplexity", "-m", test::tiny_model_dir(), "-f", file, "--ctx", "16", "--stride", "5"};
  a.insert(a.end(), extra.begin(), extra.end());
  return test::run_k3(a);
}

// Relative closeness at the printed precision (6 decimals).
void expect_printed(double printed, double value) {
  EXPECT_NEAR(printed, value, 1e-6 * std::abs(value) + 2e-6);
}

TEST(PerplexityCli, JsonParsesAndMatchesTheTextAndTheLibrary) {
  test::TempDir dir;
  const std::string file = dir.write("text.txt", kText);
  const test::CliResult text = run_perplexity(file);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  const test::CliResult js = run_perplexity(file, {"--json"});
  ASSERT_EQ(js.exit_code, 0) << js.err;
  const json j = json::parse(js.out);

  double ppl = 0, ppl_se = 0, nll = 0, nll_se = 0, bpb = 0;
  ASSERT_EQ(std::sscanf(text.out.c_str(), "perplexity %lf +/- %lf  nll %lf +/- %lf  bits/byte %lf",
                        &ppl, &ppl_se, &nll, &nll_se, &bpb),
            5)
      << text.out;
  expect_printed(ppl, j["perplexity"].get<double>());
  expect_printed(ppl_se, j["perplexity_stderr"].get<double>());
  expect_printed(nll, j["nll"].get<double>());
  expect_printed(nll_se, j["nll_stderr"].get<double>());
  expect_printed(bpb, j["bits_per_byte"].get<double>());
  const std::string counts = "scored " + std::to_string(j["n_scored"].get<int64_t>()) + " of " +
                             std::to_string(j["n_tokens"].get<int64_t>()) + " tokens (" +
                             std::to_string(j["n_bytes"].get<int64_t>()) + " bytes) in " +
                             std::to_string(j["n_windows"].get<int64_t>()) + " windows";
  EXPECT_NE(text.out.find(counts), std::string::npos) << text.out << "\n" << counts;

  const Tokenizer& tok = test::tiny_tokenizer();
  const std::vector<int32_t> ids = tok.encode(kText);
  const PerplexityParams p{.ctx = 16, .stride = 5};
  const PerplexityResult r = perplexity(test::tiny_model(), ids, p);
  const int64_t bytes = perplexity_scored_bytes(tok, ids, p);
  const double rel = 1e-9;
  EXPECT_NEAR(j["perplexity"].get<double>(), r.perplexity(), rel * r.perplexity());
  EXPECT_NEAR(j["perplexity_stderr"].get<double>(), r.perplexity_stderr(),
              rel * r.perplexity_stderr());
  EXPECT_NEAR(j["nll"].get<double>(), r.mean_nll(), rel * r.mean_nll());
  EXPECT_NEAR(j["nll_sum"].get<double>(), r.nll_sum, rel * r.nll_sum);
  EXPECT_NEAR(j["nll_stderr"].get<double>(), r.nll_stderr(), rel * r.nll_stderr());
  EXPECT_NEAR(j["bits_per_byte"].get<double>(), r.nll_sum / std::log(2.0) / bytes,
              rel * r.bits_per_byte(bytes));
  EXPECT_EQ(j["n_bytes"].get<int64_t>(), bytes);
  EXPECT_EQ(j["n_scored"].get<int64_t>(), r.n_scored);
  EXPECT_EQ(j["n_tokens"].get<int64_t>(), static_cast<int64_t>(ids.size()));
  EXPECT_EQ(j["n_windows"].get<int64_t>(), r.n_windows);
  EXPECT_EQ(j["n_evaluated"].get<int64_t>(), r.n_evaluated);
  EXPECT_EQ(j["ctx"].get<int64_t>(), 16);
  EXPECT_EQ(j["stride"].get<int64_t>(), 5);
  EXPECT_GT(j["tokens_per_second"].get<double>(), 0);
  EXPECT_GT(j["seconds"].get<double>(), 0);

  // The windows add up to the totals.
  ASSERT_EQ(static_cast<int64_t>(j["windows"].size()), r.n_windows);
  double sum = 0;
  int64_t n = 0;
  for (const json& w : j["windows"]) {
    sum += w["nll_sum"].get<double>();
    n += w["n_scored"].get<int64_t>();
    EXPECT_NEAR(w["running_perplexity"].get<double>(), std::exp(sum / n), rel * std::exp(sum / n));
    if (w["n_scored"].get<int64_t>() > 0) {
      EXPECT_NEAR(w["perplexity"].get<double>(),
                  std::exp(w["nll_sum"].get<double>() / w["n_scored"].get<int64_t>()),
                  rel * w["perplexity"].get<double>());
    }
  }
  EXPECT_EQ(n, r.n_scored);
  EXPECT_NEAR(sum, r.nll_sum, rel * r.nll_sum);
}

TEST(PerplexityCli, StderrShowsTheRunningValueAfterEachWindow) {
  test::TempDir dir;
  const std::string file = dir.write("text.txt", kText);
  const test::CliResult js = run_perplexity(file, {"--json"});
  ASSERT_EQ(js.exit_code, 0) << js.err;
  const json j = json::parse(js.out);
  // Not a terminal: llama-perplexity's "[1]12.3456,[2]11.9800," on one line.
  const std::regex item(R"(\[(\d+)\]([0-9.]+),)");
  std::vector<double> values;
  int64_t k = 0;
  for (auto it = std::sregex_iterator(js.err.begin(), js.err.end(), item);
       it != std::sregex_iterator(); ++it, ++k) {
    EXPECT_EQ(std::stoll((*it)[1].str()), k + 1);
    values.push_back(std::stod((*it)[2].str()));
  }
  ASSERT_EQ(static_cast<int64_t>(values.size()), j["n_windows"].get<int64_t>()) << js.err;
  for (size_t i = 0; i < values.size(); ++i) {
    const double running = j["windows"][i]["running_perplexity"].get<double>();
    EXPECT_NEAR(values[i], running, 5e-5 + 1e-9 * running);
  }
  EXPECT_NEAR(values.back(), j["perplexity"].get<double>(), 5e-5 + 1e-9 * values.back());
  EXPECT_EQ(js.err.find('\r'), std::string::npos) << "no progress bar off a terminal";
}

TEST(PerplexityCli, NoTextOnATerminalIsAnErrorNotAWait) {
  const int master = posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(master, 0);
  ASSERT_EQ(grantpt(master), 0);
  ASSERT_EQ(unlockpt(master), 0);
  const std::string slave = ptsname(master);
  test::TempDir dir;
  // stdin is the terminal; `timeout` turns a wait for input into exit status 124.
  const std::string cmd = "timeout 60 " + test::shell_quote(K3_CLI_PATH) + " perplexity -m " +
                          test::shell_quote(test::tiny_model_dir()) + " <" +
                          test::shell_quote(slave) + " >" + test::shell_quote(dir.file("out")) +
                          " 2>" + test::shell_quote(dir.file("err"));
  const int status = std::system(cmd.c_str());
  close(master);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 0);
  EXPECT_NE(WEXITSTATUS(status), 124) << "k3 perplexity waited on the terminal";
  const std::string err = test::read_file(dir.file("err"));
  EXPECT_NE(err.find("-f FILE"), std::string::npos) << err;
  EXPECT_NE(err.find("standard input"), std::string::npos) << err;
  EXPECT_TRUE(test::read_file(dir.file("out")).empty());
}

}  // namespace
}  // namespace k3
