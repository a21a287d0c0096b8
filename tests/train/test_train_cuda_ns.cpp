// Muon's Newton–Schulz on the device (train/cuda/train_ns.cu, gpu_ns.cpp) against the host's
// (train/newton_schulz.h) on fresh random matrices: wide, tall, square, single rows and
// columns, several at once; a zero matrix; bit-for-bit repeats; and a whole optimiser step.
// Both are fp32 with the products summed in other orders, and the quintic iteration amplifies
// rounding along small singular values (its slope at 0 is 3.44 a step), so the outputs (entries
// of order 1/sqrt(cols)) are held to 2e-4 absolute.
#if defined(K3_HAVE_CUDA)

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "train/cuda/gpu_batch.h"
#include "train/cuda_test_util.h"
#include "train/newton_schulz.h"
#include "train/optimizer.h"

namespace k3::train::gpu::test {
namespace {

constexpr double kTol = 2e-4;

std::vector<float> normal_vec(std::mt19937_64& rng, int64_t n) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

TEST(TrainCudaNs, BatchMatchesTheHost) {
  K3_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(31);
  struct Case {
    int64_t nb, rows, cols;
    int steps;
    NsCoefficients coef;
  };
  const Case cases[] = {
      {1, 1, 1, 5, kNsQuintic},    {2, 1, 7, 5, kNsQuintic},     {3, 7, 1, 5, kNsQuintic},
      {1, 3, 3, 5, kNsQuintic},    {4, 5, 12, 5, kNsQuintic},    {4, 12, 5, 5, kNsQuintic},
      {3, 64, 64, 5, kNsQuintic},  {2, 128, 384, 5, kNsQuintic}, {2, 384, 128, 5, kNsQuintic},
      {5, 32, 256, 5, kNsQuintic}, {1, 33, 70, 0, kNsQuintic},   {2, 20, 30, 8, kNsCubic}};
  for (const Case& c : cases) {
    const int64_t count = c.rows * c.cols;
    const std::vector<float> g = normal_vec(rng, c.nb * count);
    std::vector<float> want(g.size());
    for (int64_t i = 0; i < c.nb; ++i) {
      newton_schulz(g.data() + i * count, want.data() + i * count, c.rows, c.cols, c.steps, c.coef);
    }
    const DevBuf dg = upload(g);
    DevBuf out(c.nb * count);
    newton_schulz_batch(dg.data(), out.data(), c.nb, c.rows, c.cols, c.steps, c.coef.a, c.coef.b,
                        c.coef.c);
    const std::vector<float> got = download(out);
    EXPECT_LE(rel_err(got, want), kTol)
        << c.nb << " x " << c.rows << " x " << c.cols << ", " << c.steps << " steps";
    // The same call again gives the same bits (fixed-order norms, deterministic products).
    DevBuf again(c.nb * count);
    newton_schulz_batch(dg.data(), again.data(), c.nb, c.rows, c.cols, c.steps, c.coef.a, c.coef.b,
                        c.coef.c);
    EXPECT_EQ(download(again), got) << c.rows << " x " << c.cols;
  }
}

TEST(TrainCudaNs, ZeroMatrixGivesZeros) {
  K3_SKIP_WITHOUT_GPU();
  const std::vector<float> g(2 * 6 * 4, 0.0f);
  const DevBuf dg = upload(g);
  DevBuf out(static_cast<int64_t>(g.size()));
  newton_schulz_batch(dg.data(), out.data(), 2, 6, 4, 5, kNsQuintic.a, kNsQuintic.b, kNsQuintic.c);
  EXPECT_EQ(download(out), g);
}

// An optimiser with the device orthogonaliser against the host's, two steps of per-head,
// plain, wide and tall Muon matrices (blocks of one shape from different tensors share a batch).
TEST(TrainCudaNs, OptimizerStepsMatchTheHost) {
  K3_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(32);
  struct Spec {
    std::vector<int64_t> shape;
    HeadAxis axis;
    int64_t heads;
  };
  const Spec specs[] = {{{64, 48}, HeadAxis::rows, 4},
                        {{48, 64}, HeadAxis::cols, 4},
                        {{16, 48}, HeadAxis::none, 1},
                        {{96, 32}, HeadAxis::none, 1}};
  std::vector<std::vector<float>> host_w, dev_w, grads, start;
  for (const Spec& s : specs) {
    host_w.push_back(random_vec(rng, s.shape[0] * s.shape[1]));
    dev_w.push_back(host_w.back());
    start.push_back(host_w.back());
    grads.push_back(random_vec(rng, s.shape[0] * s.shape[1]));
  }
  auto params = [&](std::vector<std::vector<float>>& w) {
    std::vector<Param> ps;
    for (size_t i = 0; i < std::size(specs); ++i) {
      ps.push_back(Param{"p" + std::to_string(i), specs[i].shape, w[i].data(), grads[i].data(),
                         ParamGroup{Update::muon, specs[i].axis, specs[i].heads, true}});
    }
    return ps;
  };
  Optimizer host(params(host_w), OptimizerConfig{}), dev(params(dev_w), OptimizerConfig{});
  dev.set_orthogonalizer(orthogonalize_on_device);
  for (float lr : {0.02f, 0.01f}) {
    host.step(lr);
    dev.step(lr);
  }
  for (size_t i = 0; i < host_w.size(); ++i) {
    EXPECT_LE(rel_err(dev_w[i], host_w[i]), 1e-5) << "tensor " << i;
    EXPECT_GT(rel_err(dev_w[i], start[i]), 1e-3) << "tensor " << i << " did not move";
  }
}

}  // namespace
}  // namespace k3::train::gpu::test

#endif  // K3_HAVE_CUDA
