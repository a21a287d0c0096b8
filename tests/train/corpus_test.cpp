// scripts/corpus_text.py, the text side of scripts/make-corpus.sh: fortunes become held-out
// entries, merging deduplicates paragraphs, keeps every held-out line out of training and
// applies mixture weights, and each source kind's extraction (markup, R data, WordNet).
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

// One file of a source kind through `corpus_text.py extract KIND`: the text it writes.
std::string extracted(test::TempDir& d, const std::string& kind, const std::string& name,
                      const std::string& content) {
  d.write(name, content);
  const std::string out = d.path() + "/" + name + ".out";
  EXPECT_EQ(corpus_text("extract " + kind + " " + out + " " + d.path() + "/" + name), 0) << kind;
  return slurp(out);
}

// A binary source (an R database, a SWORD module) through `corpus_text.py extract KIND`: PYTHON
// writes it into the folder given as its argument, then INPUT there is extracted: the text.
std::string extracted_binary(test::TempDir& d, const std::string& kind, const std::string& python,
                             const std::string& input) {
  const std::string p = d.path() + "/";
  EXPECT_EQ(
      std::system(("python3 -c \"import os, struct, zlib, sys\n" + python + "\" " + p).c_str()), 0)
      << kind;
  EXPECT_EQ(corpus_text("extract " + kind + " " + p + "out.txt " + p + input), 0) << kind;
  return slurp(p + "out.txt");
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

// PART@N writes each of the part's kept paragraphs N times; a repeat elsewhere is still a
// duplicate, and held-out text stays out however it is weighted.
TEST(Corpus, MergeWeightsRepeatParagraphs) {
  test::TempDir d;
  const std::string p = d.path() + "/";
  const std::string a = "It is a truth universally acknowledged that a single man wants a wife.";
  const std::string b = "Call me Ishmael. Some years ago, never mind how long precisely, I went.";
  const std::string held = "Never put off till tomorrow what you can do today, said my aunt.";
  d.write("held.txt", held + "\n");
  d.write("novel.txt", a + "\n\n" + held + "\n\n" + b + "\n");
  d.write("manual.txt", b + "\n\nThe manual page lists every option the program takes.\n");
  ASSERT_EQ(corpus_text("merge " + p + "train.txt " + p + "held.txt " + p + "novel.txt@3 " + p +
                        "manual.txt"),
            0);
  const std::string three = a + "\n\n" + a + "\n\n" + a + "\n\n" + b + "\n\n" + b + "\n\n" + b;
  EXPECT_EQ(slurp(p + "train.txt"),
            three + "\n\nThe manual page lists every option the program takes.\n\n");
}

// WordNet's data.* lines become "words: gloss" (the licence header, indented, is skipped).
TEST(Corpus, ExtractWordNetGlosses) {
  test::TempDir d;
  const std::string p = d.path() + "/";
  d.write("data.noun",
          "  1 This software and database is being provided to you, the LICENSEE\n"
          "00406612 04 n 02 fold 0 folding 0 001 @ 00404403 n 0000 | the act of folding; "
          "\"he gave the napkins a double fold\"  \n"
          "00407090 04 n 02 jut 0 old_man(a) 0 000 | the act of projecting out  \n");
  ASSERT_EQ(corpus_text("extract wordnet " + p + "wn.txt " + p + "data.noun"), 0);
  EXPECT_EQ(slurp(p + "wn.txt"),
            "fold, folding: the act of folding; \"he gave the napkins a double fold\"\n"
            "jut, old man: the act of projecting out\n\n");
}

// An R lazy-load database (zlib records of XDR-serialized objects, as R packages store their
// data): every string of a character vector, one line each, NA left out, in order.
TEST(Corpus, ExtractRDataStrings) {
  test::TempDir d;
  const std::string make =
      "def chars(s): b = s.encode(); return struct.pack('>iI', 0x00040009, len(b)) + b\n"
      "def obj(lines):\n"
      "    x = b'X\\n' + struct.pack('>iii', 3, 0x40201, 0x30500) + struct.pack('>i', 5) + "
      "b'UTF-8'\n"
      "    x += struct.pack('>iI', 16, len(lines))\n"
      "    for s in lines: x += chars(s) if s is not None else struct.pack('>iI', 9, 0xFFFFFFFF)\n"
      "    return struct.pack('>I', len(x)) + zlib.compress(x)\n"
      "open(os.path.join(sys.argv[1], 'Rdata.rdb'), 'wb').write("
      "obj(['EMMA', '', 'Emma Woodhouse, handsome,', None]) + obj(['Call me Ishmael.']))\n";
  EXPECT_EQ(extracted_binary(d, "rdata", make, "Rdata.rdb"),
            "EMMA\n\nEmma Woodhouse, handsome,\n\nCall me Ishmael.\n\n");
}

// The games' prose: Cataclysm's JSON (prose keys only: no map rows, no "//" comments; short
// strings gathered into one paragraph), Endless Sky's data files (backquoted conversation lines
// and description lines, one paragraph per block) and Crawl's databases (entries between
// '%%%%' lines, their key line and links to other entries left out); markup dropped,
// placeholders filled with a plain word.
TEST(Corpus, ExtractGameProse) {
  test::TempDir d;
  EXPECT_EQ(extracted(d, "gamejson", "items.json",
                      R"([{"type": "TOOL", "name": "knife", "rows": ["..##..", "..##.. .. .. .."],
               "//": "keep this in sync with the recipe below please",
               "description": "A <color_red>rusty</color> knife, still sharp enough to use.",
               "dynamic_line": "Hello <npcname>, nice to meet you."}])"),
            "A rusty knife, still sharp enough to use.\nHello Sam, nice to meet you.\n\n");
  EXPECT_EQ(extracted(d, "gamescript", "missions.txt",
                      "mission \"Intro\"\n"
                      "\tdescription \"Bring the cargo to <destination> by <date>.\"\n"
                      "\ton offer\n\t\tconversation\n"
                      "\t\t\t`The captain nods at you.`\n"
                      "\t\t\t`\t\"Welcome aboard,\" she says.`\n"
                      "\t\t\tchoice\n\t\t\t\t`\t\"Thanks.\"`\n"),
            "Bring the cargo to Mars by the fifth.\n\n"
            "The captain nods at you.\n\"Welcome aboard,\" she says.\n\n");
  EXPECT_EQ(extracted(d, "crawldb", "monsters.txt",
                      "%%%%\ndagger\n\nA short knife with a sharp point, made for stabbing.\n"
                      "%%%%\nknife\n\n<dagger>\n%%%%\nrat\n\nThe rat squeaks at you angrily.\n"
                      "    -Anonymous\n%%%%\n"),
            "A short knife with a sharp point, made for stabbing.\n\n"
            "The rat squeaks at you angrily.\n    -Anonymous\n\n");
}

// Wesnoth's WML: the translatable strings (_ "..."), "" read as a quote, help links read as
// their text, other markup dropped; strings naming a variable or macro and short ones (names,
// labels) left out; consecutive strings gathered into paragraphs of ~200 characters.
TEST(Corpus, ExtractWesnothStrings) {
  test::TempDir d;
  EXPECT_EQ(extracted(d, "wml", "scenario.cfg",
                      "[scenario]\n    name= _ \"The Elves Besieged\"\n"
                      "    [message]\n        speaker=Konrad\n"
                      "        message= _ \"Master Delfador! There are orcs \"\"everywhere\"\",\n"
                      "what shall we do?\"\n    [/message]\n"
                      "    message= _ \"Well done, $unit.name, you held the line today.\"\n"
                      "    message= _ \"{GREETING} and welcome to the great river port.\"\n"
                      "    text= _ \"<ref>dst='..terrain_sand' text='Sand'</ref> is hard to "
                      "<b>walk</b> on for most units.\"\n[/scenario]\n"),
            "Master Delfador! There are orcs \"everywhere\",\nwhat shall we do?\n"
            "Sand is hard to walk on for most units.\n\n");
}

// A SWORD zText Bible module: the .bzs index (offset, size, unpacked size per block) into the
// zlib blocks of .bzz, read in order; OSIS paragraphs and chapters become blank lines, poetry
// lines and titles line breaks, footnotes and word markup are dropped.
TEST(Corpus, ExtractSwordModule) {
  test::TempDir d;
  const std::string make =
      "blocks = [b'<chapter n=\\\"23\\\" sID=\\\"Ps.23\\\"/><title>A Psalm by David.</title>'\n"
      "          b'<l level=\\\"1\\\" sID=\\\"g1\\\"/><w lemma=\\\"H1\\\">Yahweh</w> is my "
      "shepherd;<l eID=\\\"g1\\\"/>'\n"
      "          b'<l level=\\\"1\\\" sID=\\\"g2\\\"/>I shall lack nothing.<l eID=\\\"g2\\\"/>',\n"
      "          b'<div sID=\\\"p1\\\" type=\\\"x-p\\\"/>In the beginning<note "
      "placement=\\\"foot\\\">or, at first</note> was the Word.']\n"
      "index, data = b'', b''\n"
      "for b in blocks:\n"
      "    z = zlib.compress(b); index += struct.pack('<III', len(data), len(z), len(b)); data "
      "+= z\n"
      "open(os.path.join(sys.argv[1], 'ot.bzs'), 'wb').write(index)\n"
      "open(os.path.join(sys.argv[1], 'ot.bzz'), 'wb').write(data)\n";
  EXPECT_EQ(extracted_binary(d, "sword", make, "ot.bzs"),
            "A Psalm by David.\nYahweh is my shepherd;\nI shall lack nothing.\n\n"
            "In the beginning was the Word.\n\n");
}

}  // namespace
}  // namespace k3
