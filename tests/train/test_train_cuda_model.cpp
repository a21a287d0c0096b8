// The whole-model training pass on the GPU (train/cuda/gpu_batch.h) against the CPU's
// (WindowBatch over loss_and_grads) and against PyTorch autograd (tests/reference/k3_torch.py),
// on tiny K3 checkpoints with every feature (KDA + MLA, AttnRes blocks, LatentMoE with a shared
// expert, SiTU-GLU, a dense first layer) and on the default model's training config: the loss,
// every parameter's gradient, the router logits the balancer sees, repeatability bit for bit,
// and `k3 train --device cuda` resuming bit-exactly. Skips without a CUDA device, except the
// test that `--device cuda` without one fails with a clear message.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cuda/cuda.h"
#include "common/cli_harness.h"
#include "loader/checkpoint.h"
#include "train/cuda/gpu_batch.h"
#include "train/tiny_train_config.h"
#include "train/train_case_util.h"
#include "train/window_batch.h"

namespace k3::test {
namespace {

constexpr const char* kTinyConfig = kTinyTrainConfig;

struct Logits {
  std::vector<int64_t> layer;
  std::vector<std::vector<float>> values;
};

train::RouterObserver recorder(Logits& out, int64_t E) {
  return [&out, E](int64_t layer, const float* logits, int64_t T) {
    out.layer.push_back(layer);
    out.values.emplace_back(logits, logits + T * E);
  };
}

// fp32 against fp32 in another order: the existing fp32 CPU pass is ~1e-4 from float64
// autograd on these models (test_train_grad.cpp), so two fp32 passes may differ by about
// twice that; 1e-3 is still far below what a wrong term gives (≥ 1e-1).
constexpr double kGradTol = 1e-3;

void check_gpu_against_cpu(const std::string& config_path, int64_t windows, int64_t T,
                           int64_t pass_windows) {
  TempDir dir;
  const Checkpoint ckpt(init_model(dir, config_path));
  const HParams& hp = ckpt.hparams();
  const ParamSet params = ParamSet::from_checkpoint(ckpt);
  const auto ws = random_windows(windows, T, hp.vocab, 3);

  ParamSet cpu = params.zeros_like(), gpu = params.zeros_like();
  Logits cpu_logits, gpu_logits;
  train::WindowBatch batch;
  const double cpu_loss = batch.run(hp, params, ws, cpu, recorder(cpu_logits, hp.moe.n_expert));
  train::GpuBatch device(hp, params, pass_windows);
  const double gpu_loss = device.run(params, ws, gpu, recorder(gpu_logits, hp.moe.n_expert));
  EXPECT_NEAR(gpu_loss, cpu_loss, 1e-5 * std::fabs(cpu_loss));

  double worst = 0;
  std::string worst_name;
  for (const auto& [name, p] : cpu.all()) {
    const double e = tensor_err(gpu.all().at(name).value, p.value);
    EXPECT_LE(e, kGradTol) << name;
    if (e > worst) worst = e, worst_name = name;
  }
  std::printf("GPU vs CPU: loss %.9g vs %.9g, worst gradient %s at %.3g\n", gpu_loss, cpu_loss,
              worst_name.c_str(), worst);
  ASSERT_EQ(gpu_logits.layer, cpu_logits.layer);
  for (size_t i = 0; i < cpu_logits.values.size(); ++i) {
    EXPECT_LE(tensor_err(gpu_logits.values[i], cpu_logits.values[i]), 1e-4) << "logits " << i;
  }
}

TEST(TrainCudaModel, TinyModelMatchesCpuOverPasses) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  TempDir dir;
  check_gpu_against_cpu(dir.write("config.json", kTinyConfig), 5, 24, 2);  // passes of 2, 2, 1
}

TEST(TrainCudaModel, TinyModelOddLengthOneWindow) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  TempDir dir;
  check_gpu_against_cpu(dir.write("config.json", kTinyConfig), 1, 37, 4);
}

TEST(TrainCudaModel, DefaultTrainingConfigMatchesCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  check_gpu_against_cpu(K3_SOURCE_DIR "/configs/train-default.json", 3, 64, 3);
}

TEST(TrainCudaModel, RepeatsBitForBitAndLossOnlyLeavesGrads) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  TempDir dir;
  const Checkpoint ckpt(init_model(dir, dir.write("config.json", kTinyConfig)));
  const HParams& hp = ckpt.hparams();
  const ParamSet params = ParamSet::from_checkpoint(ckpt);
  const auto ws = random_windows(4, 40, hp.vocab, 9);
  train::GpuBatch device(hp, params, 4);
  ParamSet a = params.zeros_like(), b = params.zeros_like();
  const double la = device.run(params, ws, a, nullptr);
  const double lb = device.run(params, ws, b, nullptr);
  EXPECT_EQ(la, lb);
  for (const auto& [name, p] : a.all()) EXPECT_EQ(p.value, b.all().at(name).value) << name;
  ParamSet untouched = params.zeros_like();
  TrainOptions only;
  only.loss_only = true;
  EXPECT_EQ(device.run(params, ws, untouched, nullptr, only), la);
  for (const auto& [name, p] : untouched.all()) {
    for (float v : p.value) ASSERT_EQ(v, 0.0f) << name;
  }
}

// The GPU's gradients of one window against float64 autograd, as test_train_grad.cpp checks
// the CPU's fp32 pass (same tolerance, same reason).
TEST(TrainCudaModel, TinyModelMatchesTorchAutograd) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  TempDir dir;
  const std::string model = init_model(dir, dir.write("config.json", kTinyConfig));
  const Checkpoint ckpt(model);
  const HParams& hp = ckpt.hparams();
  const ParamSet params = ParamSet::from_checkpoint(ckpt);
  const auto ws = random_windows(1, 24, hp.vocab, 5);
  ParamSet grads = params.zeros_like();
  train::GpuBatch device(hp, params, 1);
  const double loss = device.run(params, ws, grads, nullptr);
  grads.write_safetensors(dir.file("grads.safetensors"), "language_model.");
  auto join = [](const std::vector<int64_t>& v) {
    std::string s;
    for (int64_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
    return s;
  };
  const char* py = std::getenv("K3_PYTHON");
  char loss_str[64];
  std::snprintf(loss_str, sizeof loss_str, "%.17g", loss);
  const std::string cmd = shell_quote(py ? py : "/usr/bin/python3") + " " +
                          shell_quote(K3_SOURCE_DIR "/tests/reference/k3_torch.py") + " " +
                          shell_quote(model) + " --tokens " + join(ws[0].tokens) + " --targets " +
                          join(ws[0].targets) + " --grads " +
                          shell_quote(dir.file("grads.safetensors")) + " --loss " + loss_str +
                          " --tol 1e-3 >" + shell_quote(dir.file("out")) + " 2>&1";
  const int status = std::system(cmd.c_str());
  const std::string out = read_file_bytes(dir.file("out"));
  std::printf("%s", out.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "k3_torch.py failed:\n" << out;
}

std::string corpus(const TempDir& dir) {
  std::string text;
  for (int i = 0; i < 400; ++i) text += "the cat sat on the mat " + std::to_string(i % 17) + ". ";
  return dir.write("train.txt", text);
}

// The weights and the optimiser state that `k3 train` writes.
std::string read_state(const std::string& dir) {
  return read_file_bytes(dir + "/model-00001-of-00001.safetensors") +
         read_file_bytes(dir + "/optimizer.safetensors");
}

TEST(TrainCudaModel, CliTrainOnDeviceResumesBitExactly) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  TempDir dir;
  const std::string model =
      init_model(dir, dir.write("config.json", tiny_byte_level_train_config()));
  const CliResult tok =
      run_k3({"tokenizer", "train", "-i", corpus(dir), "-o", model, "--vocab-size", "512", "-q"});
  ASSERT_EQ(tok.exit_code, 0) << tok.err;
  const std::vector<std::string> common = {"train",   "--data", corpus(dir), "--seq-len", "32",
                                           "--batch", "3",      "--accum",   "2",         "--steps",
                                           "4",       "--lr",   "3e-3",      "--device",  "cuda",
                                           "--seed",  "1"};
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = common;
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult r = run_k3(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r;
  };
  run({"-m", model, "-o", dir.file("full")});
  run({"-m", model, "-o", dir.file("half"), "--stop-after", "2"});
  run({"--resume", dir.file("half"), "-o", dir.file("resumed")});
  const std::string full = read_state(dir.file("full"));
  ASSERT_FALSE(full.empty());
  EXPECT_TRUE(full == read_state(dir.file("resumed"))) << "the resumed run differs";
}

TEST(TrainCudaModel, DeviceCudaWithoutGpuFailsClearly) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is present";
  TempDir dir;
  const std::string model =
      init_model(dir, dir.write("config.json", tiny_byte_level_train_config()));
  const CliResult tok =
      run_k3({"tokenizer", "train", "-i", corpus(dir), "-o", model, "--vocab-size", "512", "-q"});
  ASSERT_EQ(tok.exit_code, 0) << tok.err;
  const CliResult r = run_k3({"train", "-m", model, "--data", corpus(dir), "-o", dir.file("out"),
                              "--device", "cuda", "--steps", "1"});
  EXPECT_NE(r.exit_code, 0);
  // "no CUDA device is available", or in a build without CUDA "this build has no CUDA backend".
  EXPECT_NE(r.err.find("error: training on the GPU: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("CUDA"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace k3::test
