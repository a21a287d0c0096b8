// scripts/corpus_text.py, the text side of scripts/make-corpus.sh: fortunes become held-out
// entries, and merging deduplicates paragraphs and keeps every held-out line out of training.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "common/cli_harness.h"

namespace k3 {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int corpus_text(const std::string& args) {
  const std::string cmd =
      "python3 " K3_SOURCE_DIR "/scripts/corpus_text.py " + args + " 2>/dev/null";
  return std::system(cmd.c_str());
}

TEST(Corpus, HeldOutNeverReachesTraining) {
  test::TempDir d;
  const std::string p = d.path() + "/";
  d.write("fortunes",
          "A visit to a strange place will bring fresh work.\n%\nShort.\n%\n"
          "Never put off till tomorrow what you can do today.\n%\n"
          "A visit to a strange place will bring fresh work.\n");
  ASSERT_EQ(corpus_text("fortunes " + p + "held.txt " + p + "fortunes"), 0);
  const std::string held = slurp(p + "held.txt");
  EXPECT_EQ(held,
            "A visit to a strange place will bring fresh work.\n\n"
            "Never put off till tomorrow what you can do today.\n");  // deduplicated; "Short." out
  const std::string para1 = "The quick brown fox jumps over the lazy dog near the river bank.";
  const std::string para2 = "Every program should document its options in a manual page.";
  const std::string leak =
      "He said:\nNever put off till tomorrow what you can do today.\nAnd left.";
  // Wrapped and cased differently, still the same eight words in a row.
  const std::string rewrapped =
      "Remember: NEVER put off till\ntomorrow, what you can do today, my friend.";
  d.write("a.txt", para1 + "\n\n" + leak + "\n\n" + para2 + "\n\n" + rewrapped + "\n");
  d.write("b.txt", "  " + para1 + "  \n\n{ x = 1; y[2] = 3; } /* 123 */ {{}} ;; == \n\n" + para2);
  ASSERT_EQ(corpus_text("merge " + p + "train.txt " + p + "held.txt " + p + "a.txt " + p + "b.txt"),
            0);
  EXPECT_EQ(slurp(p + "train.txt"), para1 + "\n\n" + para2 + "\n\n");
}

TEST(Corpus, ExtractCleansMarkup) {
  test::TempDir d;
  const std::string p = d.path() + "/";
  d.write("x.rst", "Title\n=====\n\n.. note::\n\nUse :func:`open` and ``close``.\n");
  ASSERT_EQ(corpus_text("extract rst " + p + "rst.txt " + p + "x.rst"), 0);
  EXPECT_EQ(slurp(p + "rst.txt"), "Title\n\nUse open and close.\n\n");
  d.write("x.html", "<html><style>p{}</style><p>One &amp; two.</p><p>Three</p></html>");
  ASSERT_EQ(corpus_text("extract html " + p + "html.txt " + p + "x.html"), 0);
  EXPECT_EQ(slurp(p + "html.txt"), "One & two.\n\nThree\n\n");
  EXPECT_NE(corpus_text("extract nosuchkind " + p + "o.txt " + p + "x.rst"), 0);
}

}  // namespace
}  // namespace k3
