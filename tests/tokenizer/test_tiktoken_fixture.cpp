// Bit-exactness against tiktoken: every case of the committed fixture (> 5 MB of varied text
// encoded by tiktoken with K3's pattern and K3's 400,000/25,000 cutting rules, plus decode cases)
// must give the same ids / text. A failure names the case and the first differing position.
#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>

#include "tokenizer/fixture.h"

namespace k3::test {
namespace {

TEST(TiktokenFixture, LoadsWithExpectedShape) {
  const Tokenizer& tok = fixture_tokenizer();
  EXPECT_EQ(tok.vocab_base(), 6260);
  EXPECT_EQ(tok.n_vocab(), 6260 + 256);
  EXPECT_GT(fixture_cases().size(), 3000u);
}

TEST(TiktokenFixture, EncodeMatchesTiktokenExactly) {
  const Tokenizer& tok = fixture_tokenizer();
  size_t n_bytes = 0, n_ids = 0, n_cases = 0;
  for (size_t c = 0; c < fixture_cases().size(); ++c) {
    const FixtureCase& fc = fixture_cases()[c];
    if (fc.kind == CaseKind::decode) continue;
    std::vector<int32_t> got = tok.encode(fc.text, /*allow_special=*/true);
    std::string diff = describe_first_difference(tok, fc.text, fc.ids, got);
    ASSERT_TRUE(diff.empty()) << "case " << c << " (specials allowed, " << fc.text.size()
                              << " bytes): " << diff;
    n_ids += got.size();
    if (fc.kind == CaseKind::encode_both) {
      got = tok.encode(fc.text, /*allow_special=*/false);
      diff = describe_first_difference(tok, fc.text, fc.ids_no_special, got);
      ASSERT_TRUE(diff.empty()) << "case " << c << " (specials disallowed, " << fc.text.size()
                                << " bytes): " << diff;
      n_ids += got.size();
    }
    n_bytes += fc.text.size();
    ++n_cases;
  }
  EXPECT_GE(n_bytes, 5'000'000u);
  std::printf("[ fixture  ] %zu encode cases, %zu bytes of text, %zu ids: all equal\n", n_cases,
              n_bytes, n_ids);
}

TEST(TiktokenFixture, DecodeMatchesTiktokenReplacement) {
  const Tokenizer& tok = fixture_tokenizer();
  size_t n = 0;
  for (size_t c = 0; c < fixture_cases().size(); ++c) {
    const FixtureCase& fc = fixture_cases()[c];
    if (fc.kind != CaseKind::decode) continue;
    ASSERT_EQ(tok.decode(fc.ids), fc.text) << "decode case " << c;
    ++n;
  }
  EXPECT_GE(n, 3000u);
}

// decode(encode(x)) == x for every fixture text, in both special modes.
TEST(TiktokenFixture, DecodeOfEncodeIsIdentity) {
  const Tokenizer& tok = fixture_tokenizer();
  for (size_t c = 0; c < fixture_cases().size(); ++c) {
    const FixtureCase& fc = fixture_cases()[c];
    if (fc.kind == CaseKind::decode) continue;
    ASSERT_EQ(tok.decode(tok.encode(fc.text, true)), fc.text) << "case " << c;
    ASSERT_EQ(tok.decode(tok.encode(fc.text, false)), fc.text) << "case " << c;
  }
}

// Single-thread throughput on the fixture text (printed; not a pass/fail criterion), in process
// CPU time so that other load on the machine disturbs it less. "Long" cases are the > 100 kB ones
// built around 25,000-char runs, which exercise the heap BPE.
double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

TEST(TiktokenFixture, Throughput) {
  const Tokenizer& tok = fixture_tokenizer();
  for (bool long_cases : {false, true}) {
    size_t bytes = 0, ids = 0;
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      bytes = ids = 0;
      double t0 = cpu_seconds();
      for (const FixtureCase& fc : fixture_cases()) {
        if (fc.kind == CaseKind::decode || (fc.text.size() > 100'000) != long_cases) continue;
        ids += tok.encode(fc.text, true).size();
        bytes += fc.text.size();
      }
      best = std::min(best, cpu_seconds() - t0);
    }
    std::printf("[ speed    ] encode %s cases: %.2f MB in %.3f s CPU = %.1f MB/s, %.2f M ids/s\n",
                long_cases ? "long" : "ordinary", bytes / 1e6, best, bytes / 1e6 / best,
                ids / 1e6 / best);
    EXPECT_GT(ids, 0u);
  }
}

}  // namespace
}  // namespace k3::test
