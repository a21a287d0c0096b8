// The GPU training pass's orchestration without a GPU: src/train/cuda/gpu_*.cpp (the batched
// layers, the AttnRes stream, the expert grouping, the router-logit hand-over, the device
// orthogonaliser's batching) built against host stand-ins for every device kernel
// (host_kernels.cpp: the CPU ops), run beside the CPU trainer. It checks the wiring, slices and
// grouping in every build, CI included; the kernels themselves are tested on a GPU
// (tests/train/test_train_cuda_*.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/cli_harness.h"
#include "loader/checkpoint.h"
#include "train/cuda/gpu_batch.h"
#include "train/optimizer.h"
#include "train/optimizer_params.h"
#include "train/tiny_train_config.h"
#include "train/train_case_util.h"
#include "train/window_batch.h"

namespace k3::test {
namespace {

// The stand-ins run the CPU ops, but KDA's recurrent form against the CPU trainer's chunked one
// and the windows' sums in another order: ~1e-4 apart on these models; a wrong term is ≥ 1e-1.
constexpr double kGradTol = 1e-3;

void check_against_cpu(const std::string& config_path, int64_t windows, int64_t T,
                       int64_t pass_windows) {
  TempDir dir;
  const Checkpoint ckpt(init_model(dir, config_path, "5"));
  const HParams& hp = ckpt.hparams();
  const ParamSet params = ParamSet::from_checkpoint(ckpt);
  const std::vector<train::Window> ws = random_windows(windows, T, hp.vocab, 3);
  const int64_t E = hp.moe.n_expert;
  ParamSet cpu = params.zeros_like(), emu = params.zeros_like();
  std::vector<float> logits_cpu, logits_emu;
  train::WindowBatch batch;
  const double loss_cpu = batch.run(hp, params, ws, cpu, [&](int64_t, const float* l, int64_t n) {
    logits_cpu.insert(logits_cpu.end(), l, l + n * E);
  });
  train::GpuBatch dev(hp, params, pass_windows);
  const double loss_emu = dev.run(params, ws, emu, [&](int64_t, const float* l, int64_t n) {
    logits_emu.insert(logits_emu.end(), l, l + n * E);
  });
  EXPECT_NEAR(loss_emu, loss_cpu, 1e-5 * std::fabs(loss_cpu));
  for (const auto& [name, p] : cpu.all()) {
    EXPECT_LE(tensor_err(emu.all().at(name).value, p.value), kGradTol) << name;
  }
  ASSERT_EQ(logits_emu.size(), logits_cpu.size());
  EXPECT_LE(tensor_err(logits_emu, logits_cpu), 1e-4);

  // One optimiser step from those gradients with the device orthogonaliser's batching (the
  // iteration itself on the host here) gives the host orthogonaliser's bits.
  ParamSet host_w = params, dev_w = params;
  train::Optimizer host(train::optimizer_params(host_w, cpu, hp, true), {});
  train::Optimizer grouped(train::optimizer_params(dev_w, cpu, hp, true), {});
  grouped.set_orthogonalizer(train::orthogonalize_on_device);
  host.step(0.01f);
  grouped.step(0.01f);
  int moved = 0;
  for (const auto& [name, p] : host_w.all()) {
    EXPECT_TRUE(p.value == dev_w.all().at(name).value) << name;
    moved += p.value != params.all().at(name).value;
  }
  EXPECT_GT(moved, 10);  // (not a no-op)
}

TEST(GpuPassEmulated, TinyModelInPassesMatchesTheCpuTrainer) {
  TempDir dir;
  check_against_cpu(dir.write("config.json", kTinyTrainConfig), 5, 24, 2);
}

TEST(GpuPassEmulated, OneOddWindowMatchesTheCpuTrainer) {
  TempDir dir;
  check_against_cpu(dir.write("config.json", kTinyTrainConfig), 1, 7, 4);
}

TEST(GpuPassEmulated, DefaultTrainingConfigMatchesTheCpuTrainer) {
  check_against_cpu(std::string(K3_SOURCE_DIR) + "/configs/train-default.json", 2, 40, 2);
}

}  // namespace
}  // namespace k3::test
