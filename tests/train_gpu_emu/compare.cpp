// tests/train_gpu_emu/run.sh: GpuBatch (its kernels on the host) against WindowBatch on one
// checkpoint; prints the losses, every gradient tensor off by more than 1e-4 (relative to its
// largest value), and the largest router-logit difference; then one optimiser step over the
// CPU gradients with orthogonalize_on_device (its batches grouped by shape, the iteration on
// the host) against the host's orthogonaliser: the same bits.
#include <cmath>
#include <cstdio>
#include <random>

#include "loader/checkpoint.h"
#include "train/cuda/gpu_batch.h"
#include "train/optimizer_params.h"
#include "train/window_batch.h"
using namespace k3;
int main(int argc, char** argv) {
  const Checkpoint ckpt(argv[1]);
  const HParams& hp = ckpt.hparams();
  const ParamSet params = ParamSet::from_checkpoint(ckpt);
  const int64_t n = atoi(argv[2]), T = atoi(argv[3]), pw = atoi(argv[4]);
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int64_t> pick(0, hp.vocab - 1);
  std::vector<train::Window> ws(n);
  for (auto& w : ws) {
    std::vector<int64_t> s(T + 1);
    for (auto& t : s) t = pick(rng);
    w.tokens.assign(s.begin(), s.end() - 1);
    w.targets.assign(s.begin() + 1, s.end());
  }
  ParamSet cpu = params.zeros_like(), gpu = params.zeros_like();
  std::vector<float> lc, lg;
  train::WindowBatch batch;
  const double a = batch.run(hp, params, ws, cpu, [&](int64_t, const float* l, int64_t T) {
    lc.insert(lc.end(), l, l + T * hp.moe.n_expert);
  });
  train::GpuBatch dev(hp, params, pw);
  const double b = dev.run(params, ws, gpu, [&](int64_t, const float* l, int64_t T) {
    lg.insert(lg.end(), l, l + T * hp.moe.n_expert);
  });
  std::printf("loss cpu %.9g emu %.9g\n", a, b);
  double worst = 0;
  std::string wn;
  for (const auto& [name, p] : cpu.all()) {
    double d = 0, s = 0;
    const auto& g = gpu.all().at(name).value;
    for (size_t i = 0; i < g.size(); ++i) {
      d = std::max(d, std::fabs(double(g[i]) - p.value[i]));
      s = std::max(s, std::fabs(double(p.value[i])));
    }
    const double e = s > 0 ? d / s : d;
    if (e > 1e-4) std::printf("  %s: %.3g\n", name.c_str(), e);
    if (e > worst) worst = e, wn = name;
  }
  double dl = 0;
  for (size_t i = 0; i < lc.size() && i < lg.size(); ++i)
    dl = std::max(dl, (double)std::fabs(lc[i] - lg[i]));
  std::printf("worst %s %.3g; logits %zu vs %zu, max diff %.3g\n", wn.c_str(), worst, lc.size(),
              lg.size(), dl);

  ParamSet host_w = params, dev_w = params;
  train::Optimizer host(train::optimizer_params(host_w, cpu, hp, true), {});
  train::Optimizer dev_opt(train::optimizer_params(dev_w, cpu, hp, true), {});
  dev_opt.set_orthogonalizer(train::orthogonalize_on_device);
  host.step(0.01f);
  dev_opt.step(0.01f);
  size_t differ = 0;
  for (const auto& [name, p] : host_w.all()) differ += p.value != dev_w.all().at(name).value;
  std::printf("optimizer step, device orthogonaliser (emulated) vs host: %zu tensors differ\n",
              differ);
}
