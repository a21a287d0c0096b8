// `k3 bench` in the manner of llama-bench: every combination of the comma-separated lists is one
// row; JSON and CSV carry the same rows; decode rows are set against the bandwidth floor of
// their weight bytes; bad lists are one-line errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/cli_harness.h"

namespace k3 {
namespace {

const std::string kTiny = K3_SOURCE_DIR "/tests/data/models/c1_tiny";
const std::string kMoe = K3_PUBLIC_GOLDEN_DIR "/p1_mxfp4_7layer";

nlohmann::json bench_json(const std::vector<std::string>& extra, const std::string& model) {
  std::vector<std::string> args = {"bench", "-m", model, "-r", "2", "-o", "json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const test::CliResult r = test::run_k3(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

TEST(Bench, EveryCombinationOfTheListsIsARow) {
  const nlohmann::json rows =
      bench_json({"-p", "3,5", "-n", "2", "-d", "0,4", "-t", "1,2", "-b", "1,2"}, kTiny);
  // per thread count and batch: pp3, pp5, tg2, tg2@d4
  ASSERT_EQ(rows.size(), 2u * 2u * 4u) << rows.dump(1);
  std::set<std::string> seen;
  for (const auto& row : rows) {
    seen.insert(row["test"].get<std::string>() + "/t" + std::to_string(row["threads"].get<int>()) +
                "/b" + std::to_string(row["batch"].get<int>()));
    EXPECT_EQ(row["samples_tokens_per_s"].size(), 2u);
    EXPECT_GT(row["tokens_per_s_median"].get<double>(), 0.0);
    EXPECT_GT(row["read_bandwidth_bytes_per_s"].get<double>(), 1e8);  // any machine reads 100 MB/s
  }
  EXPECT_EQ(seen.size(), rows.size());
  EXPECT_TRUE(seen.count("tg2@d4/t2/b2")) << rows.dump(1);
}

TEST(Bench, DecodeRowsCarryTheirWeightBytesAndFloor) {
  const nlohmann::json rows = bench_json({"-p", "0", "-n", "2", "-b", "1,8", "-t", "1"}, kMoe);
  ASSERT_EQ(rows.size(), 2u);
  const double b1 = rows[0]["weight_bytes_per_token"], b8 = rows[1]["weight_bytes_per_token"];
  EXPECT_GT(b1, 0.0);
  EXPECT_LT(b8, b1);  // a batch shares each step's weight reads
  for (const auto& row : rows) {
    const double floor = row["floor_tokens_per_s"], frac = row["fraction_of_floor"];
    EXPECT_NEAR(floor,
                row["read_bandwidth_bytes_per_s"].get<double>() /
                    row["weight_bytes_per_token"].get<double>(),
                1e-6 * floor);
    EXPECT_NEAR(frac, row["tokens_per_s_median"].get<double>() / floor, 1e-9);
  }
}

TEST(Bench, MarkdownAndCsvCarryTheSameRows) {
  test::CliResult md =
      test::run_k3({"bench", "-m", kTiny, "-p", "4", "-n", "2", "-r", "1", "-t", "1"});
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_NE(md.out.find("| model | size | params |"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("| c1_tiny |"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("| pp4 |"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("| tg2 |"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("memory read bandwidth:"), std::string::npos) << md.out;
  test::CliResult csv =
      test::run_k3({"bench", "-m", kTiny, "-p", "4", "-n", "2", "-r", "1", "-t", "1", "-o", "csv"});
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  std::istringstream lines(csv.out);
  std::string header, line;
  std::getline(lines, header);
  EXPECT_EQ(header.rfind("model,backend,threads,batch,test,", 0), 0u) << header;
  int n = 0;
  while (std::getline(lines, line)) n += !line.empty();
  EXPECT_EQ(n, 2) << csv.out;
}

TEST(Bench, BadListsAreOneLineErrors) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"-p", "1,,2"}, "-p: empty entry in '1,,2'"},
      {{"-n", "x"}, "-n: 'x' is not an integer"},
      {{"-t", "2,0"}, "-t/--threads must be in 1..1024, got 0"},
      {{"-b", "2,0"}, "-b must be at least 1, got 0"},
      {{"-p", "0", "-n", "0"}, "nothing to run"},
      {{"-o", "xml"}, "-o must be md, json or csv, got 'xml'"},
      {{"-p", "2000000"}, "pp2000000 needs 2000000 positions"},
  };
  for (const auto& [extra, message] : cases) {
    std::vector<std::string> args = {"bench", "-m", kTiny};
    args.insert(args.end(), extra.begin(), extra.end());
    const test::CliResult r = test::run_k3(args);
    EXPECT_EQ(r.exit_code, 1) << message;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace k3
