// The MTP head (num_nextn_predict_layers = 1, docs/TRAINING.md) outside its gradient check
// (test_train_grad.cpp): `k3 init` writes it without changing the main tensors, inference
// ignores it, bad configs and checkpoints are refused with a message, and `k3 train` trains it
// (its router balanced too), keeps it in its checkpoints and resumes bit-exactly.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/cli_harness.h"
#include "config/hparams_json.h"
#include "core/error.h"
#include "k3/model.h"
#include "loader/checkpoint.h"
#include "loader/tensor_table.h"
#include "train/params.h"

namespace k3::test {
namespace {

// Two layers (KDA + MLA), a dense first layer and a LatentMoE second, 512 ids for a
// byte-level tokenizer; MTP_LAYERS and N_EXPERTS are filled in.
constexpr const char* kConfig = R"({
  "architectures": ["KimiK3ForConditionalGeneration"], "model_type": "kimi_k3",
  "bos_token_id": 256, "eos_token_id": 257, "pad_token_id": 258, "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "text_config": {
    "model_type": "kimi_linear", "vocab_size": 512, "hidden_size": 32, "intermediate_size": 48,
    "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 2,
    "hidden_act": "situ", "rms_norm_eps": 1e-05, "max_position_embeddings": 4096,
    "q_lora_rank": 16, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4,
    "v_head_dim": 8, "num_experts": N_EXPERTS, "num_experts_per_token": 2,
    "num_shared_experts": 1, "moe_intermediate_size": 32, "routed_expert_hidden_size": 32,
    "routed_scaling_factor": 1.5, "first_k_dense_replace": 1, "moe_layer_freq": 1,
    "num_nextn_predict_layers": MTP_LAYERS, "attn_res_block_size": 1,
    "linear_attn_config": {"num_heads": 2, "head_dim": 8, "short_conv_kernel_size": 4,
      "full_attn_layers": [2], "kda_layers": [1]},
    "bos_token_id": 256, "eos_token_id": 257, "pad_token_id": 258
  }
})";

std::string config(int mtp_layers, int experts = 4) {
  std::string c = kConfig;
  auto put = [&c](const std::string& key, int v) {
    c.replace(c.find(key), key.size(), std::to_string(v));
  };
  put("MTP_LAYERS", mtp_layers);
  put("N_EXPERTS", experts);
  return c;
}

void must(const CliResult& r, const std::string& what) {
  if (r.exit_code != 0) throw std::runtime_error(what + " failed: " + r.err);
}

std::string init(const TempDir& dir, const std::string& name, int mtp_layers, int experts = 4) {
  const std::string out = dir.file(name);
  must(run_k3({"init", "--config", dir.write(name + ".json", config(mtp_layers, experts)), "-o",
               out, "--seed", "7"}),
       "k3 init " + name);
  return out;
}

const std::string kHead = "language_model.model.layers.2.";

bool is_head(const std::string& name) { return name.rfind(kHead, 0) == 0; }

std::string bytes_of(const TensorInfo& t) {
  return std::string(reinterpret_cast<const char*>(t.data), t.nbytes);
}

TEST(Mtp, InitWritesTheHeadAndLeavesTheMainTensorsAlone) {
  TempDir dir;
  const Checkpoint with(init(dir, "with", 1)), without(init(dir, "without", 0));
  int64_t head = 0;
  for (const auto& [name, t] : with.tensors()) {
    if (is_head(name)) {
      ++head;
      continue;
    }
    EXPECT_EQ(bytes_of(*t), bytes_of(without.tensor(name))) << name;
  }
  EXPECT_EQ(with.tensors().size(), without.tensors().size() + head);
  for (const char* n : {"enorm.weight", "hnorm.weight", "eh_proj.weight", "shared_head.norm.weight",
                        "self_attn.kv_b_proj.weight", "block_sparse_moe.gate.weight"}) {
    EXPECT_TRUE(with.tensors().count(kHead + n)) << n;
  }
  EXPECT_EQ(with.tensor(kHead + "eh_proj.weight").shape, (std::vector<int64_t>{32, 64}));
  // The config's size check counts the head's tensors as the table lists them.
  EXPECT_EQ(implied_size(with.hparams()).tensors,
            static_cast<int64_t>(expected_tensors(with.hparams()).size()));
  // Without experts the head's FFN is dense.
  const Checkpoint dense(init(dir, "dense", 1, 0));
  EXPECT_TRUE(dense.tensors().count(kHead + "mlp.gate_proj.weight"));
  EXPECT_FALSE(dense.tensors().count(kHead + "block_sparse_moe.gate.weight"));
  EXPECT_EQ(implied_size(dense.hparams()).tensors,
            static_cast<int64_t>(expected_tensors(dense.hparams()).size()));
}

TEST(Mtp, InferenceIgnoresTheHead) {
  TempDir dir;
  const auto with = Model::load(init(dir, "with", 1));
  const auto without = Model::load(init(dir, "without", 0));
  Sequence a(*with), b(*without);
  const std::vector<int64_t> prompt = {256, 72, 101, 108, 108, 111};
  const std::vector<float> la = a.prefill(prompt), lb = b.prefill(prompt);
  ASSERT_EQ(la.size(), lb.size());
  EXPECT_TRUE(la == lb) << "prefill logits differ";
  EXPECT_TRUE(a.decode(33) == b.decode(33)) << "decode logits differ";
}

// `k3 cost` describes the inference model: the head changes nothing in it; `k3 inspect` lists
// the head's tensors under their own component.
TEST(Mtp, CostLeavesTheHeadOutAndInspectShowsIt) {
  TempDir dir;
  auto cost = [&](int mtp) {
    const std::string c = dir.write("c.json", config(mtp));
    const CliResult r = run_k3({"cost", "--config", c});
    must(r, "k3 cost");
    return r.out;
  };
  EXPECT_EQ(cost(1), cost(0));
  const CliResult r = run_k3({"inspect", "-m", init(dir, "m", 1)});
  must(r, "k3 inspect");
  EXPECT_NE(r.out.find("mtp head"), std::string::npos) << r.out;
}

TEST(Mtp, RejectsMoreThanOneLayer) {
  TempDir dir;
  const CliResult r =
      run_k3({"init", "--config", dir.write("c.json", config(2)), "-o", dir.file("m")});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("num_nextn_predict_layers"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("at most 1"), std::string::npos) << r.err;
}

TEST(Mtp, RejectsACheckpointWithoutTheHeadItsConfigAsksFor) {
  TempDir dir;
  const std::string model = init(dir, "m", 0);
  dir.write("m/config.json", config(1));
  try {
    const Checkpoint ckpt(model);
    FAIL() << "loaded a checkpoint whose MTP head is missing";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("missing tensor"), std::string::npos) << msg;
    EXPECT_NE(msg.find(kHead), std::string::npos) << msg;
  }
  const CliResult r = run_k3({"inspect", "-m", model});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("missing tensor"), std::string::npos) << r.err;
}

std::vector<std::string> train_args(const std::string& model, const std::string& data,
                                    const std::string& out, int steps) {
  return {"train",
          "-m",
          model,
          "--data",
          data,
          "-o",
          out,
          "--seq-len",
          "24",
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
          "--mtp-weight",
          "0.5"};
}

nlohmann::json history(const std::string& ckpt) {
  return nlohmann::json::parse(read_file_bytes(ckpt + "/train_state.json")).at("history");
}

// k3 train moves every head tensor (the router bias by balancing), keeps them all, and a
// stop + resume gives the straight run's bytes.
TEST(Mtp, TrainTrainsTheHeadAndResumesBitExactly) {
  TempDir dir;
  const std::string model = init(dir, "init", 1);
  std::string text;
  for (int i = 0; i < 12; ++i) text += "The quick brown fox jumps over the lazy dog.\n";
  const std::string data = dir.write("train.txt", text);
  must(run_k3({"tokenizer", "train", "-i", data, "-o", model, "--vocab-size", "512", "-q"}),
       "k3 tokenizer train");
  const std::string straight = dir.file("straight"), split = dir.file("split");
  must(run_k3(train_args(model, data, straight, 4)), "straight k3 train");
  std::vector<std::string> first = train_args(model, data, split, 4);
  first.insert(first.end(), {"--stop-after", "2"});
  must(run_k3(first), "first half");
  std::vector<std::string> second = train_args(model, data, split, 4);
  second[1] = "--resume";
  second[2] = split;
  must(run_k3(second), "resumed half");
  for (const char* file : {"model-00001-of-00001.safetensors", "optimizer.safetensors"}) {
    const std::string a = read_file_bytes(straight + "/" + file),
                      b = read_file_bytes(split + "/" + file);
    ASSERT_FALSE(a.empty());
    EXPECT_TRUE(a == b) << file << " differs between the straight and the resumed run";
  }
  const nlohmann::json ha = history(straight), hb = history(split);
  ASSERT_EQ(ha.size(), 4u);
  ASSERT_EQ(hb.size(), 4u);
  for (size_t i = 0; i < ha.size(); ++i) EXPECT_EQ(ha[i].at("loss"), hb[i].at("loss"));

  const ParamSet before = ParamSet::from_checkpoint(Checkpoint(model));
  const ParamSet after = ParamSet::from_checkpoint(Checkpoint(straight));
  int64_t head = 0;
  for (const auto& [name, p] : before.all()) {
    if (!is_head(name)) continue;
    ++head;
    ASSERT_TRUE(after.all().count(name)) << name << " is missing from the trained checkpoint";
    EXPECT_NE(p.value, after.all().at(name).value) << name << " did not change";
  }
  EXPECT_GT(head, 20);
}

}  // namespace
}  // namespace k3::test
