// scripts/reshape-model.py, which reshapes a trained checkpoint for more training: fewer BPE
// ranks (the first N, exactly the tokenizer training would have stopped at, with the embedding
// and lm_head rows of the kept ids), more routed experts (twins of its own), a larger top-k.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "common/cli_harness.h"
#include "train/tiny_train_config.h"

namespace k3 {
namespace {

using test::run_k3;
using test::shell_quote;
using test::TempDir;

// The tiny training config with another vocabulary (ids: ranks, then the 256 specials, BOS
// first), expert count and top-k.
std::string tiny_config(int vocab, int experts, int top_k) {
  std::string c = test::kTinyTrainConfig;
  auto set = [&c](const std::string& key, int value) {
    for (size_t at = c.find("\"" + key + "\": "); at != std::string::npos;
         at = c.find("\"" + key + "\": ", at + 1)) {
      const size_t from = at + key.size() + 4, to = c.find_first_of(",}", from);
      c.replace(from, to - from, std::to_string(value));
    }
  };
  set("vocab_size", vocab);
  set("bos_token_id", vocab - 256);
  set("eos_token_id", vocab - 255);
  set("pad_token_id", vocab - 254);
  set("num_experts", experts);
  set("num_experts_per_token", top_k);
  return c;
}

// Made-up words from syllables, skewed towards the first ones: enough distinct pairs for a few
// hundred BPE merges.
std::string training_text() {
  const std::vector<std::string> syllables = {"ka", "ro", "mi",  "ten", "sul", "ba", "que", "lor",
                                              "in", "ve", "dra", "po",  "sh",  "ea", "ny",  "gu"};
  std::mt19937 rng(7);
  std::vector<std::string> words(2000);
  for (std::string& w : words)
    for (int n = 1 + rng() % 3; n > 0; --n) w += syllables[rng() % syllables.size()];
  std::string text;
  for (int line = 0; line < 2000; ++line) {
    for (int w = 0; w < 9; ++w)
      text += (w ? " " : "") + words[std::min(rng() % words.size(), rng() % words.size())];
    text += line % 5 == 4 ? ".\n\n" : ".\n";
  }
  return text;
}

int reshape(const std::string& args) {
  return std::system(
      ("python3 " K3_SOURCE_DIR "/scripts/reshape-model.py " + args + " >/dev/null 2>&1").c_str());
}

// A random checkpoint of tiny_config(768, 4, 2) with a 512-rank tokenizer trained on text.
struct Trained {
  TempDir dir;
  std::string model = dir.file("model"), text = dir.write("text.txt", training_text());
  Trained() {
    dir.write("c768.json", tiny_config(768, 4, 2));
    EXPECT_EQ(run_k3({"tokenizer", "train", "-i", text, "-o", dir.file("tok768"), "--vocab-size",
                      "768", "-q"})
                  .exit_code,
              0);
    EXPECT_EQ(run_k3({"init", "--config", dir.file("c768.json"), "-o", model, "--mxfp4", "-s", "3"})
                  .exit_code,
              0);
    for (const char* f : {"tiktoken.model", "tokenizer_config.json"})
      std::filesystem::copy_file(dir.file("tok768/") + f, model + "/" + f,
                                 std::filesystem::copy_options::overwrite_existing);
  }
};

std::vector<float> logits(const std::string& model, const std::string& ids,
                          const std::string& out) {
  const auto r = run_k3({"logits", "-m", model, "--ids", ids, "-o", out, "-t", "1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string bytes = test::read_file_bytes(out);
  const size_t header = 10 + (static_cast<unsigned char>(bytes[8]) | bytes[9] << 8);
  std::vector<float> v((bytes.size() - header) / sizeof(float));
  std::memcpy(v.data(), bytes.data() + header, v.size() * sizeof(float));
  return v;
}

TEST(ReshapeModel, FewerRanksAreTheSmallerTrainedTokenizerWithTheSameRows) {
  Trained t;
  t.dir.write("c640.json", tiny_config(640, 4, 2));
  ASSERT_EQ(reshape(t.model + " " + t.dir.file("r640") + " --config " + t.dir.file("c640.json")),
            0);
  // The first 384 ranks are what training stops at with 384 ranks.
  ASSERT_EQ(run_k3({"tokenizer", "train", "-i", t.text, "-o", t.dir.file("tok640"), "--vocab-size",
                    "640", "-q"})
                .exit_code,
            0);
  EXPECT_EQ(test::read_file_bytes(t.dir.file("r640/tiktoken.model")),
            test::read_file_bytes(t.dir.file("tok640/tiktoken.model")));
  const auto tok = run_k3({"tokenize", "-m", t.dir.file("r640"), "-p", "[BOS]kaquero dra"});
  const auto want = run_k3({"tokenize", "-m", t.dir.file("tok640"), "-p", "[BOS]kaquero dra"});
  EXPECT_EQ(tok.out, want.out);
  EXPECT_EQ(tok.out.substr(0, 4), "384 ") << "[BOS] moved to the first id above the ranks";
  EXPECT_NE(test::read_file_bytes(t.dir.file("tok768/tiktoken.model")),
            test::read_file_bytes(t.dir.file("r640/tiktoken.model")))
      << "the text must give more than 384 ranks for the cut to be tested";
  // Ids below 384 and the specials (moved from 512.. to 384..) keep their rows: same logits.
  const auto before = logits(t.model, "512,300,17,383,99,513,200", t.dir.file("a.npy"));
  const auto after = logits(t.dir.file("r640"), "384,300,17,383,99,385,200", t.dir.file("b.npy"));
  ASSERT_EQ(before.size(), 7u * 768);
  ASSERT_EQ(after.size(), 7u * 640);
  for (int pos = 0; pos < 7; ++pos)
    for (int id = 0; id < 640; ++id) {
      const int old_id = id < 384 ? id : id + 128;
      EXPECT_NEAR(after[pos * 640 + id], before[pos * 768 + old_id], 1e-5)
          << "position " << pos << " id " << id;
    }
}

TEST(ReshapeModel, TwinExpertsAreCopiesWithRouterRowsPushedApart) {
  Trained t;
  t.dir.write("c6.json", tiny_config(768, 6, 3));
  const std::string twins = t.dir.file("twins");
  ASSERT_EQ(reshape(t.model + " " + twins + " --config " + t.dir.file("c6.json") +
                    " --new-experts twins"),
            0);
  // Checked with the script's own safetensors reader; the engine's loader reads it below.
  const std::string check = R"(
import importlib.util, struct, sys
spec = importlib.util.spec_from_file_location("r", sys.argv[1]); r = importlib.util.module_from_spec(spec)
spec.loader.exec_module(r)
old, new = r.read_checkpoint(sys.argv[2]), r.read_checkpoint(sys.argv[3])
bf = lambda raw: [struct.unpack("<f", b"\0\0" + raw[i:i + 2])[0] for i in range(0, len(raw), 2)]
layers = [n[:-len("gate.weight")] for n in old if n.endswith("moe.gate.weight")]
assert len(layers) == 3, layers
for l in layers:
    for twin, src in ((4, 0), (5, 1)):
        for w in ("w1", "w2", "w3"):
            for part in ("weight_packed", "weight_scale"):
                assert new[f"{l}experts.{twin}.{w}.{part}"] == old[f"{l}experts.{src}.{w}.{part}"]
    g_old, g_new = bf(old[l + "gate.weight"][2]), bf(new[l + "gate.weight"][2])
    width = len(g_old) // 4
    assert g_new[2 * width:4 * width] == g_old[2 * width:4 * width]  # experts without a twin
    for twin, src in ((4, 0), (5, 1)):
        a, b = (g_new[e * width:(e + 1) * width] for e in (src, twin))
        o = g_old[src * width:(src + 1) * width]
        assert a != b, "twin rows must differ"
        assert max(abs((x + y) / 2 - z) for x, y, z in zip(a, b, o)) <= 0.01 * max(map(abs, o))
    bias_old, bias_new = old[l + "gate.e_score_correction_bias"][2], new[l + "gate.e_score_correction_bias"][2]
    assert bias_new == bias_old + bias_old[:8]
)";
  ASSERT_EQ(std::system(("python3 -c " + shell_quote(check) +
                         " " K3_SOURCE_DIR "/scripts/reshape-model.py " + t.model + " " + twins)
                            .c_str()),
            0);
  for (float v : logits(twins, "512,1,2,3", t.dir.file("t.npy"))) ASSERT_TRUE(std::isfinite(v));
  const auto inspect = run_k3({"inspect", "-m", twins});
  EXPECT_NE(inspect.out.find("MoE 6 experts, top-3"), std::string::npos) << inspect.out;
}

TEST(ReshapeModel, FreshAndSilentExpertsComeFromTheInit) {
  Trained t;
  t.dir.write("c6.json", tiny_config(768, 6, 2));
  ASSERT_EQ(run_k3({"init", "--config", t.dir.file("c6.json"), "-o", t.dir.file("init"), "--mxfp4",
                    "-s", "9"})
                .exit_code,
            0);
  for (const std::string mode : {"fresh", "silent"}) {
    const std::string out = t.dir.file(mode);
    ASSERT_EQ(reshape(t.model + " " + out + " --config " + t.dir.file("c6.json") +
                      " --new-experts " + mode + " --init " + t.dir.file("init")),
              0);
    const std::string check = R"(
import importlib.util, sys
spec = importlib.util.spec_from_file_location("r", sys.argv[1]); r = importlib.util.module_from_spec(spec)
spec.loader.exec_module(r)
old, init, new = (r.read_checkpoint(d) for d in sys.argv[2:5])
silent = sys.argv[5] == "silent"
for name, t in new.items():
    if ".experts." not in name or "shared" in name:
        continue
    expert = int(name.split(".experts.")[1].split(".")[0])
    want = old[name] if expert < 4 else init[name]
    if silent and expert >= 4 and ".w2.weight_packed" in name:
        assert t[2] == bytes(len(t[2])) and want[2] != t[2], name
    else:
        assert t == want, name
for name in (n for n in new if n.endswith("moe.gate.weight")):
    width = new[name][1][1] * 2
    assert new[name][2] == old[name][2] + init[name][2][4 * width:], name
)";
    EXPECT_EQ(std::system(("python3 -c " + shell_quote(check) +
                           " " K3_SOURCE_DIR "/scripts/reshape-model.py " + t.model + " " +
                           t.dir.file("init") + " " + out + " " + mode)
                              .c_str()),
              0)
        << mode;
  }
}

TEST(ReshapeModel, RefusesWhatItCannotReshape) {
  Trained t;
  std::string wider = tiny_config(768, 4, 2);
  wider.replace(wider.find("\"hidden_size\": 32"), 17, "\"hidden_size\": 64");
  t.dir.write("wider.json", wider);
  EXPECT_NE(reshape(t.model + " " + t.dir.file("a") + " --config " + t.dir.file("wider.json")), 0);
  t.dir.write("more.json", tiny_config(768, 6, 2));
  EXPECT_NE(reshape(t.model + " " + t.dir.file("b") + " --config " + t.dir.file("more.json") +
                    " --new-experts fresh"),
            0)
      << "fresh experts need --init";
  t.dir.write("bigger.json", tiny_config(1024, 4, 2));
  EXPECT_NE(reshape(t.model + " " + t.dir.file("c") + " --config " + t.dir.file("bigger.json")), 0);
  t.dir.write("fewer.json", tiny_config(768, 3, 2));
  EXPECT_NE(reshape(t.model + " " + t.dir.file("d") + " --config " + t.dir.file("fewer.json")), 0);
  for (const char* refused : {"a", "b", "c", "d"})  // checked before anything is written
    EXPECT_FALSE(std::filesystem::exists(t.dir.file(refused))) << refused;
  std::filesystem::create_directories(t.dir.file("busy"));
  t.dir.write("busy/x", "x");
  EXPECT_NE(reshape(t.model + " " + t.dir.file("busy") + " --config " + t.dir.file("more.json") +
                    " --new-experts twins"),
            0);
}

}  // namespace
}  // namespace k3
