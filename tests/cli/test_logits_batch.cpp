// `k3 logits` with several --ids lists (one batch through shared steps), --chunk, --decode
// and --stagger: each list's NPY equals the list run alone with the same chunking, and the
// float64 reference logits; bad options are clear errors. `k3 bench --batch`.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/cli_harness.h"
#include "k3/npy.h"

namespace k3 {
namespace {

const std::string kCase = K3_PUBLIC_GOLDEN_DIR "/p1_mxfp4_7layer";

std::vector<int64_t> case_ids() {
  std::ifstream f(kCase + "/tokens.json");
  return nlohmann::json::parse(f).get<std::vector<int64_t>>();
}

std::string id_list(const std::vector<int64_t>& ids, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

// Runs `k3 logits` and returns the NPY files it wrote (PREFIX.i.npy for several lists).
std::vector<NpyArray> logits(const std::vector<std::string>& lists,
                             const std::vector<std::string>& extra) {
  test::TempDir dir;
  std::vector<std::string> args = {"logits", "-m", kCase, "-o", dir.file("out.npy")};
  for (const std::string& l : lists) args.insert(args.end(), {"--ids", l});
  args.insert(args.end(), extra.begin(), extra.end());
  const test::CliResult r = test::run_k3(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<NpyArray> out;
  if (lists.size() == 1) {
    out.push_back(npy_read_f32(dir.file("out.npy")));
  } else {
    for (size_t i = 0; i < lists.size(); ++i)
      out.push_back(npy_read_f32(dir.file("out." + std::to_string(i) + ".npy")));
  }
  return out;
}

// Worst per-row relative L2 of got against the first rows of want.
double max_rel(const NpyArray& got, const NpyArray& want) {
  const int64_t V = got.shape[1];
  double worst = 0;
  for (int64_t t = 0; t < got.shape[0]; ++t) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < V; ++i) {
      const double e = double(got.data[t * V + i]) - want.data[t * V + i];
      num += e * e;
      den += double(want.data[t * V + i]) * want.data[t * V + i];
    }
    worst = std::max(worst, std::sqrt(num / den));
  }
  return worst;
}

TEST(LogitsBatch, EachListEqualsItsLoneRunAndTheReference) {
  const std::vector<int64_t> ids = case_ids();
  const std::vector<std::string> lists = {id_list(ids, ids.size()), id_list(ids, 5),
                                          id_list(ids, 17)};
  const NpyArray ref = npy_read_f32(kCase + "/logits_prefill.npy");
  for (const std::vector<std::string>& mode :
       {std::vector<std::string>{}, {"--chunk", "7"}, {"--decode", "--stagger", "2"}}) {
    const std::vector<NpyArray> batched = logits(lists, mode);
    ASSERT_EQ(batched.size(), lists.size());
    for (size_t i = 0; i < lists.size(); ++i) {
      const NpyArray alone = logits({lists[i]}, mode).at(0);
      ASSERT_EQ(batched[i].shape, alone.shape);
      EXPECT_EQ(batched[i].data, alone.data) << "list " << i;  // batch invariant: exact
      EXPECT_LE(max_rel(batched[i], ref), 5e-5) << "list " << i;
    }
  }
}

TEST(LogitsBatch, BadOptionsAreClearErrors) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--ids", "1,2", "--chunk", "0"}, "--chunk must be at least 1, got 0"},
      {{"--ids", "1,2", "--chunk", "2", "--decode"}, "exclude each other"},
      {{"--ids", "1,2", "--ids", "3,99999"}, "--ids #2: token id 99999"},
      {{"--ids", "1,2", "--stagger", "-1"}, "--stagger must be at least 0, got -1"},
      {{}, "--ids"}};
  for (const auto& [extra, message] : cases) {
    test::TempDir dir;
    std::vector<std::string> args = {"logits", "-m", kCase, "-o", dir.file("x.npy")};
    args.insert(args.end(), extra.begin(), extra.end());
    const test::CliResult r = test::run_k3(args);
    EXPECT_EQ(r.exit_code, 1) << message;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  }
}

TEST(BenchBatch, ReportsOneRowPerTestOfTheBatch) {
  const test::CliResult r =
      test::run_k3({"bench", "-m", kCase, "-p", "4", "-n", "3", "-b", "3", "-r", "1", "-t", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* s : {"| 1 | 3 | pp4 |", "| 1 | 3 | tg3 |"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
}

}  // namespace
}  // namespace k3
