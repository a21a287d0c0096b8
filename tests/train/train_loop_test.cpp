// `k3 train` end to end on a tiny all-feature K3 (KDA + MLA, AttnRes, LatentMoE with a shared
// expert, SiTU-GLU) and a 512-id byte-level tokenizer: the loss falls on a repeated text, a
// stop + resume is bit-exact with a straight run, and the saved checkpoint loads in the engine
// and gives the trainer's own loss.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/cli_harness.h"
#include "k3/model.h"
#include "k3/tokenizer.h"
#include "loader/checkpoint.h"
#include "train/tiny_train_config.h"
#include "train/train_data.h"

namespace k3::test {
namespace {

const char* kText =
    "The quick brown fox jumps over the lazy dog. A small model learns this line by heart.\n";

std::string repeated(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += kText;
  return s;
}

void must(const CliResult& r, const std::string& what) {
  if (r.exit_code != 0) throw std::runtime_error(what + " failed: " + r.err);
}

// An initial checkpoint with a byte-level tokenizer (256 ranks + 256 specials) beside it.
struct Fixture {
  TempDir dir;
  std::string model, data, val;
  Fixture() {
    model = dir.file("init");
    data = dir.write("train.txt", repeated(20));
    val = dir.write("val.txt", repeated(3));
    must(run_k3({"init", "--config", dir.write("config.json", tiny_byte_level_train_config()), "-o",
                 model, "--seed", "7"}),
         "k3 init");
    must(run_k3({"tokenizer", "train", "-i", data, "-o", model, "--vocab-size", "512", "-q"}),
         "k3 tokenizer train");
  }
  std::vector<std::string> train_args(const std::string& out, int steps) const {
    return {"train",
            "-m",
            model,
            "--data",
            data,
            "--val",
            val,
            "-o",
            out,
            "--seq-len",
            "32",
            "--batch",
            "2",
            "--steps",
            std::to_string(steps),
            "--lr",
            "0.01",
            "--schedule",
            "constant",
            "-t",
            "1",
            "--seed",
            "3",
            "--eval-every",
            "10",
            "--eval-windows",
            "2"};
  }
};

nlohmann::json history(const std::string& ckpt) {
  return nlohmann::json::parse(read_file_bytes(ckpt + "/train_state.json")).at("history");
}

TEST(TrainLoop, LossFallsOnRepeatedText) {
  Fixture f;
  const std::string out = f.dir.file("out");
  must(run_k3(f.train_args(out, 40)), "k3 train");
  const nlohmann::json h = history(out);
  ASSERT_EQ(h.size(), 40u);
  double first = 0, last = 0;
  for (int i = 0; i < 5; ++i) {
    first += h[i].at("loss").get<double>() / 5;
    last += h[35 + i].at("loss").get<double>() / 5;
  }
  std::printf("mean loss: steps 1-5 %.4f, steps 36-40 %.4f\n", first, last);
  EXPECT_LT(last, 0.5 * first);
  EXPECT_TRUE(h[39].at("val_loss").is_number());
  EXPECT_LT(h[39].at("val_loss").get<double>(), 0.5 * first);
  for (const auto& p : h) {  // top-2 of 4 experts: a load is at most T = 2 x the mean
    EXPECT_GE(p.at("max_vio").get<double>(), 0.0);
    EXPECT_LE(p.at("max_vio").get<double>(), 1.0);
  }
  const std::string svg = read_file_bytes(out + "/train_curve.svg");
  EXPECT_NE(svg.find("Training loss"), std::string::npos);
  EXPECT_NE(svg.find("MaxVio"), std::string::npos);
}

// `balance`: QB sets the biases from scratch each step; Loss-Free adds to the float64 biases
// that the checkpoint must carry.
void check_resume(const std::string& balance) {
  Fixture f;
  const std::string straight = f.dir.file("straight"), split = f.dir.file("split");
  std::vector<std::string> straight_args = f.train_args(straight, 6);
  straight_args.insert(straight_args.end(), {"--balance", balance});
  must(run_k3(straight_args), "straight k3 train");
  std::vector<std::string> first = f.train_args(split, 6);
  first.insert(first.end(), {"--stop-after", "3", "--balance", balance});
  must(run_k3(first), "first half");
  ASSERT_EQ(history(split).size(), 3u);
  std::vector<std::string> second = f.train_args(split, 6);
  second[1] = "--resume";
  second[2] = split;
  second.insert(second.end(), {"--balance", balance});
  must(run_k3(second), "resumed half");
  for (const char* file : {"model-00001-of-00001.safetensors", "optimizer.safetensors"}) {
    const std::string a = read_file_bytes(straight + "/" + file),
                      b = read_file_bytes(split + "/" + file);
    ASSERT_FALSE(a.empty());
    EXPECT_TRUE(a == b) << file << " differs between the straight and the resumed run";
  }
  // Every step's loss, gradient norm, lr and MaxVio agree exactly (not the timings, and the
  // split run also evaluated where it stopped).
  const nlohmann::json a = history(straight), b = history(split);
  ASSERT_EQ(a.size(), 6u);
  ASSERT_EQ(b.size(), 6u);
  for (size_t i = 0; i < a.size(); ++i) {
    for (const char* key : {"step", "loss", "grad_norm", "lr", "max_vio"}) {
      EXPECT_EQ(a[i].at(key), b[i].at(key)) << key << " of step " << i + 1;
    }
  }
  EXPECT_EQ(a[5].at("val_loss"), b[5].at("val_loss"));
  EXPECT_FALSE(std::filesystem::exists(split + ".tmp"));
  EXPECT_FALSE(std::filesystem::exists(split + ".old"));
}

// The windows of a step run side by side (train/window_batch.h) and their gradients are summed
// in window order: -t 1, 2 and 3 give the same bits (3 windows a step: with -t 2 the third
// runs in a second round).
TEST(TrainLoop, ThreadCountDoesNotChangeTheRun) {
  Fixture f;
  auto args = [&](const std::string& out, const char* threads) {
    std::vector<std::string> a = f.train_args(out, 3);
    for (size_t i = 0; i + 1 < a.size(); ++i) {
      if (a[i] == "-t") a[i + 1] = threads;
      if (a[i] == "--batch") a[i + 1] = "3";
    }
    return a;
  };
  const std::string one = f.dir.file("t1");
  must(run_k3(args(one, "1")), "k3 train -t 1");
  for (const char* threads : {"2", "3"}) {
    const std::string out = f.dir.file(std::string("t") + threads);
    must(run_k3(args(out, threads)), std::string("k3 train -t ") + threads);
    for (const char* file : {"model-00001-of-00001.safetensors", "optimizer.safetensors"}) {
      EXPECT_TRUE(read_file_bytes(one + "/" + file) == read_file_bytes(out + "/" + file))
          << file << " differs between -t 1 and -t " << threads;
    }
    const nlohmann::json a = history(one), b = history(out);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      for (const char* key : {"loss", "grad_norm", "max_vio", "val_loss"})
        EXPECT_EQ(a[i].at(key), b[i].at(key))
            << key << " of step " << i + 1 << " at -t " << threads;
    }
  }
}

TEST(TrainLoop, ResumeIsBitExactWithAStraightRun) { check_resume("qb"); }
TEST(TrainLoop, ResumeIsBitExactWithLossFreeBalancing) { check_resume("lossfree"); }

// The engine (Model::load, as k3 run/logits use it) on the saved checkpoint gives the same
// loss as the trainer's forward: exactly what the trainer logged for its held-out windows
// (recomputed from the saved fp32 weights), and within fp32 rounding through the engine.
TEST(TrainLoop, SavedCheckpointLoadsAndMatchesTheTrainersForward) {
  Fixture f;
  const std::string out = f.dir.file("out");
  must(run_k3(f.train_args(out, 10)), "k3 train");
  const CliResult inspect = run_k3({"inspect", "-m", out});
  EXPECT_EQ(inspect.exit_code, 0) << inspect.err;
  const Checkpoint ckpt(out);
  const ParamSet params = ParamSet::from_checkpoint(ckpt);
  const Tokenizer tok = Tokenizer::load(out);
  const train::TokenStream val = train::tokenize_files(tok, {f.val}, ckpt.hparams().vocab);
  const train::EvalResult ev = train::evaluate(ckpt.hparams(), params, val, 32, 2);
  EXPECT_EQ(ev.loss, history(out)[9].at("val_loss").get<double>());
  EXPECT_NEAR(ev.bits_per_byte, history(out)[9].at("val_bpb").get<double>(), 1e-12);

  auto model = Model::load(out);
  Sequence seq(*model);
  const std::vector<int64_t> in(val.ids.begin(), val.ids.begin() + 32);
  const std::vector<float> logits = seq.prefill(in);  // [32, 512]
  double nats = 0;
  for (int64_t t = 0; t < 32; ++t) {
    const float* row = logits.data() + t * 512;
    double mx = row[0], sum = 0;
    for (int64_t v = 0; v < 512; ++v) mx = std::max(mx, double(row[v]));
    for (int64_t v = 0; v < 512; ++v) sum += std::exp(double(row[v]) - mx);
    nats += mx + std::log(sum) - row[val.ids[t + 1]];
  }
  const double engine_loss = nats / 32;
  const train::EvalResult one = train::evaluate(ckpt.hparams(), params, val, 32, 1);
  std::printf("first window: engine %.7f trainer %.7f\n", engine_loss, one.loss);
  EXPECT_NEAR(engine_loss, one.loss, 1e-4 * one.loss);
}

TEST(TrainCli, RejectsBadInputWithAMessage) {
  Fixture f;
  const std::string out = f.dir.file("out");
  CliResult r = run_k3({"train", "-m", f.model, "-o", out});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--data"), std::string::npos) << r.err;
  std::vector<std::string> bad = f.train_args(out, 2);
  bad.insert(bad.end(), {"--optimizer", "sgd"});
  r = run_k3(bad);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("sgd"), std::string::npos) << r.err;
  bad = f.train_args(out, 2);
  bad[4] = f.dir.write("tiny.txt", "ab");  // --data: fewer tokens than one window
  r = run_k3(bad);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("window"), std::string::npos) << r.err;
  r = run_k3({"train", "--resume", f.model, "--data", f.data, "-o", out});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("not a training checkpoint"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));
}

// A run's train_recipe.json holds every option's value: --recipe with it repeats the run bit
// for bit, and the command line overrides what the recipe says.
TEST(TrainCli, RecipeRepeatsTheRunAndTheCommandLineOverridesIt) {
  Fixture f;
  const std::string a = f.dir.file("a"), b = f.dir.file("b"), c = f.dir.file("c");
  const CliResult first = run_k3(f.train_args(a, 4));
  must(first, "k3 train");
  // The progress lines say how long is left, until the last.
  EXPECT_NE(first.err.find("step 3/4  loss"), std::string::npos) << first.err;
  const std::string line3 = first.err.substr(first.err.find("step 3/4"));
  EXPECT_NE(line3.substr(0, line3.find('\n')).find("  eta "), std::string::npos) << line3;
  const std::string line4 = first.err.substr(first.err.find("step 4/4"));
  EXPECT_EQ(line4.substr(0, line4.find('\n')).find("eta"), std::string::npos) << line4;
  const std::string recipe = a + "/train_recipe.json";
  const nlohmann::json r = nlohmann::json::parse(read_file_bytes(recipe));
  EXPECT_EQ(r.at("steps"), "4");
  EXPECT_EQ(r.at("data"), nlohmann::json::array({f.data}));
  EXPECT_EQ(r.at("min-lr-ratio"), "0.1");  // defaults too
  must(run_k3({"train", "--recipe", recipe, "-o", b}), "k3 train --recipe");
  nlohmann::json ha = history(a), hb = history(b);
  ASSERT_EQ(ha.size(), hb.size());
  for (size_t i = 0; i < ha.size(); ++i) {
    for (const char* key : {"loss", "grad_norm", "max_vio", "lr", "val_loss"})
      EXPECT_EQ(ha[i].at(key), hb[i].at(key)) << key << " of step " << i + 1;
  }
  const char* weights = "/model-00001-of-00001.safetensors";
  EXPECT_EQ(read_file_bytes(a + weights), read_file_bytes(b + weights));
  must(run_k3({"train", "--recipe", recipe, "-o", c, "--steps", "2", "--lr", "0.02"}),
       "k3 train --recipe with overrides");
  EXPECT_EQ(history(c).size(), 2u);
  EXPECT_NE(history(c)[1].at("loss"), history(a)[1].at("loss"));  // another lr
}

TEST(TrainCli, RejectsABadRecipeWithAMessage) {
  Fixture f;
  const std::string out = f.dir.file("out");
  const std::pair<std::string, std::string> cases[] = {
      {"{\"stepz\": 3}", "unknown option 'stepz'; did you mean 'steps'?"},
      {"[1, 2]", "must be a JSON object"},
      {"{\"batch\": [1, 2]}", "'batch' must be a string or a number"},
      {"{\"steps\": 0}", "--steps must be at least 1"},
      {"{\"recipe\": \"x.json\"}", "unknown option 'recipe'"},
      {"{not json", "is not valid JSON"}};
  for (const auto& [text, message] : cases) {
    const CliResult r = run_k3({"train", "--recipe", f.dir.write("r.json", text), "-m", f.model,
                                "--data", f.data, "-o", out});
    EXPECT_NE(r.exit_code, 0) << text;
    EXPECT_NE(r.err.find(message), std::string::npos) << text << ": " << r.err;
  }
  const CliResult r = run_k3({"train", "--recipe", f.dir.file("none.json"), "-o", out});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("cannot read the recipe"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace k3::test
