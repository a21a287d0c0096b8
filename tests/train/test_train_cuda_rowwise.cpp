// The row-wise device training kernels (train/cuda/train_rowwise.cu) against the CPU ops they
// mirror, on fresh random inputs over shapes from one value to several blocks per row (and
// zero rows), with non-zero starting gradients (the backwards add) and null outputs skipped.
// The CPU backwards sum in double, the device in float: 2e-5 of the largest value is rounding.
#if defined(K3_HAVE_CUDA)

#include <cstdint>
#include <random>
#include <vector>

#include "ops/elementwise/elementwise.h"
#include "ops/embed/embed.h"
#include "ops/kda/kda_gate.h"
#include "ops/loss/cross_entropy.h"
#include "ops/norm/norm.h"
#include "ops/situ/situ.h"
#include "train/cuda_test_util.h"

namespace k3::train::gpu::test {
namespace {

constexpr double kTol = 2e-5;
constexpr float kEps = 1e-5f;

struct RowShape {
  int64_t rows, n;
};
// One value, a partial warp, rows longer than a block (1024 threads), and no rows.
const RowShape kRowShapes[] = {{1, 1}, {1, 3}, {3, 257}, {4, 1000}, {33, 64}, {2, 4099}, {0, 5}};
const int64_t kLengths[] = {0, 1, 3, 257, 1000, 100003};

// Which gradients a backward call asks for (the others are null).
struct Outs {
  bool a, b, c;  // the first, second and third gradient (unused ones false)
};

float* or_null(DevBuf& d, bool on) { return on ? d.data() : nullptr; }
float* or_null(std::vector<float>& h, bool on) { return on ? h.data() : nullptr; }

// ---- norms ----

TEST(TrainCudaRowwise, RmsNormFwd) {
  K3_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(1);
  for (const auto [rows, n] : kRowShapes) {
    const auto x = random_vec(rng, rows * n), w = random_vec(rng, n, 0.5f, 1.5f);
    std::vector<float> want(x.size());
    k3::rms_norm(x.data(), rows, n, w.data(), kEps, want.data());
    DevBuf dx = upload(x), dw = upload(w), dy(rows * n);
    gpu::rms_norm_fwd(dx.data(), rows, n, dw.data(), kEps, dy.data());
    EXPECT_LE(rel_err(download(dy), want), kTol) << rows << "x" << n;
    gpu::rms_norm_fwd(dx.data(), rows, n, dw.data(), kEps, dx.data());  // y aliasing x
    EXPECT_LE(rel_err(download(dx), want), kTol) << rows << "x" << n << " in place";
  }
}

void check_rms_bwd(std::mt19937_64& rng, int64_t rows, int64_t n, Outs o) {
  const auto x = random_vec(rng, rows * n), w = random_vec(rng, n, 0.5f, 1.5f);
  const auto dy = random_vec(rng, rows * n);
  auto dx = random_vec(rng, rows * n), dw = random_vec(rng, n);
  DevBuf d_x = upload(x), d_w = upload(w), d_dy = upload(dy), d_dx = upload(dx), d_dw = upload(dw);
  k3::rms_norm_bwd(x.data(), rows, n, w.data(), kEps, dy.data(), or_null(dx, o.a),
                   or_null(dw, o.b));
  gpu::rms_norm_bwd(d_x.data(), rows, n, d_w.data(), kEps, d_dy.data(), or_null(d_dx, o.a),
                    or_null(d_dw, o.b));
  EXPECT_LE(rel_err(download(d_dx), dx), kTol) << rows << "x" << n << " dx";
  EXPECT_LE(rel_err(download(d_dw), dw), kTol) << rows << "x" << n << " dw";
}

TEST(TrainCudaRowwise, RmsNormBwd) {
  K3_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(2);
  for (const auto [rows, n] : kRowShapes) {
    for (Outs o : {Outs{true, true, false}, Outs{true, false, false}, Outs{false, true, false}})
      check_rms_bwd(rng, rows, n, o);
  }
  // 2100 rows of 8192 exceed one pass of dw's row scratch (2^24 floats): two passes of rows.
  check_rms_bwd(rng, 2100, 8192, {true, true, false});
}

TEST(TrainCudaRowwise, GatedRmsNormFwd) {
  K3_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(3);
  for (const auto [rows, n] : kRowShapes) {
    const auto x = random_vec(rng, rows * n), z = random_vec(rng, rows * n, -4.0f, 4.0f);
    const auto w = random_vec(rng, n, 0.5f, 1.5f);
    std::vector<float> want(x.size());
    k3::gated_rms_norm(x.data(), z.data(), rows, n, w.data(), kEps, want.data());
    DevBuf dx = upload(x), dz = upload(z), dw = upload(w), dy(rows * n);
    gpu::gated_rms_norm_fwd(dx.data(), dz.data(), rows, n, dw.data(), kEps, dy.data());
    EXPECT_LE(rel_err(download(dy), want), kTol) << rows << "x" << n;
  }
}

TEST(TrainCudaRowwise, GatedRmsNormBwd) {
  K3_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(4);
  for (const auto [rows, n] : kRowShapes) {
    for (Outs o : {Outs{true, true, true}, Outs{true, false, false}, Outs{false, true, false},
                   Outs{false, false, true}}) {
      const auto x = random_vec(rng, rows * n), z = random_vec(rng, rows * n, -4.0f, 4.0f);
      const auto w = random_vec(rng, n, 0.5f, 1.5f), dy = random_vec(rng, rows * n);
      auto dx = random_vec(rng, rows * n), dz = random_vec(rng, rows * n), dw = random_vec(rng, n);
      DevBuf d_x = upload(x), d_z = upload(z), d_w = upload(w), d_dy = upload(dy);
      DevBuf d_dx = upload(dx), d_dz = upload(dz), d_dw = upload(dw);
      k3::gated_rms_norm_bwd(x.data(), z.data(), rows, n, w.data(), kEps, dy.data(),
                             or_null(dx, o.a), or_null(dz, o.b), or_null(dw, o.c));
      gpu::gated_rms_norm_bwd(d_x.data(), d_z.data(), rows, n, d_w.data(), kEps, d_dy.data(),
                              or_null(d_dx, o.a), or_null(d_dz, o.b), or_null(d_dw, o.c));
      EXPECT_LE(rel_err(download(d_dx), dx), kTol) << rows << "x" << n << " dx";
      EXPECT_LE(rel_err(download(d_dz), dz), kTol) << rows << "x" << n << " dz";
      EXPECT_LE(rel_err(download(d_dw), dw), kTol) << rows << "x" << n << " dw";
    }
  }
}

TEST(TrainCudaRowwise, L2Norm) {
  K3_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(5);
  const float eps = 1e-6f;
  for (const auto [rows, n] : kRowShapes) {
    const auto x = random_vec(rng, rows * n), dy = random_vec(rng, rows * n);
    auto dx = random_vec(rng, rows * n);
    std::vector<float> y(x.size());
    DevBuf d_x = upload(x), d_dy = upload(dy), d_dx = upload(dx), d_y(rows * n);
    k3::l2_norm(x.data(), rows, n, eps, y.data());
    k3::l2_norm_bwd(x.data(), rows, n, eps, dy.data(), dx.data());
    gpu::l2_norm_fwd(d_x.data(), rows, n, eps, d_y.data());
    gpu::l2_norm_bwd(d_x.data(), rows, n, eps, d_dy.data(), d_dx.data());
    EXPECT_LE(rel_err(download(d_y), y), kTol) << rows << "x" << n << " y";
    EXPECT_LE(rel_err(download(d_dx), dx), kTol) << rows << "x" << n << " dx";
  }
}

// ---- element-wise ----

TEST(TrainCudaRowwise, Sigmoid) {
  K3_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(6);
  for (int64_t n : kLengths) {
    const auto x = random_vec(rng, n, -8.0f, 8.0f), dy = random_vec(rng, n);
    auto dx = random_vec(rng, n);
    std::vector<float> y(n);
    DevBuf d_x = upload(x), d_dy = upload(dy), d_dx = upload(dx), d_y(n);
    k3::sigmoid_f32(x.data(), n, y.data());
    k3::sigmoid_bwd(x.data(), n, dy.data(), dx.data());
    gpu::sigmoid_fwd(d_x.data(), n, d_y.data());
    gpu::sigmoid_bwd(d_x.data(), n, d_dy.data(), d_dx.data());
    EXPECT_LE(rel_err(download(d_y), y), kTol) << n;
    EXPECT_LE(rel_err(download(d_dx), dx), kTol) << n;
  }
}

TEST(TrainCudaRowwise, ScaleAndAdd) {
  K3_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(7);
  const float s = -1.7f;
  for (int64_t n : kLengths) {
    const auto a = random_vec(rng, n), b = random_vec(rng, n), acc = random_vec(rng, n);
    std::vector<float> scaled(n), sum(n), added = acc;
    k3::scale_f32(a.data(), n, s, scaled.data());
    k3::add_f32(a.data(), b.data(), n, sum.data());
    k3::scale_bwd(n, s, a.data(), added.data());  // added += a · s
    DevBuf d_a = upload(a), d_b = upload(b), d_acc = upload(acc), d_y(n);
    gpu::scale_fwd(d_a.data(), n, s, d_y.data());
    EXPECT_LE(rel_err(download(d_y), scaled), kTol) << n << " scale";
    gpu::add_scaled(d_a.data(), n, s, d_acc.data());
    EXPECT_LE(rel_err(download(d_acc), added), kTol) << n << " add_scaled";
    gpu::add_fwd(d_a.data(), d_b.data(), n, d_y.data());
    EXPECT_LE(rel_err(download(d_y), sum), kTol) << n << " add";
    gpu::add_fwd(d_a.data(), d_b.data(), n, d_b.data());  // y aliasing b
    EXPECT_LE(rel_err(download(d_b), sum), kTol) << n << " add into b";
    gpu::add_fwd(d_a.data(), d_a.data(), n, d_a.data());  // a + a into a, then a · s in place
    gpu::scale_fwd(d_a.data(), n, s, d_a.data());
    std::vector<float> twice(n);
    for (int64_t i = 0; i < n; ++i) twice[i] = (a[i] + a[i]) * s;
    EXPECT_LE(rel_err(download(d_a), twice), kTol) << n << " in place";
  }
}

TEST(TrainCudaRowwise, MulSigmoid) {
  K3_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(8);
  for (int64_t n : kLengths) {
    for (Outs o : {Outs{true, true, false}, Outs{true, false, false}, Outs{false, true, false}}) {
      const auto x = random_vec(rng, n, -3.0f, 3.0f), g = random_vec(rng, n, -8.0f, 8.0f);
      const auto dy = random_vec(rng, n);
      auto dx = random_vec(rng, n), dg = random_vec(rng, n);
      std::vector<float> y(n);
      DevBuf d_x = upload(x), d_g = upload(g), d_dy = upload(dy), d_dx = upload(dx);
      DevBuf d_dg = upload(dg), d_y(n);
      k3::mul_sigmoid_f32(x.data(), g.data(), n, y.data());
      k3::mul_sigmoid_bwd(x.data(), g.data(), n, dy.data(), or_null(dx, o.a), or_null(dg, o.b));
      gpu::mul_sigmoid_fwd(d_x.data(), d_g.data(), n, d_y.data());
      gpu::mul_sigmoid_bwd(d_x.data(), d_g.data(), n, d_dy.data(), or_null(d_dx, o.a),
                           or_null(d_dg, o.b));
      EXPECT_LE(rel_err(download(d_y), y), kTol) << n << " y";
      EXPECT_LE(rel_err(download(d_dx), dx), kTol) << n << " dx";
      EXPECT_LE(rel_err(download(d_dg), dg), kTol) << n << " dgate";
    }
  }
}

// ---- SiTU-GLU ----

TEST(TrainCudaRowwise, SituGlu) {
  K3_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(9);
  const SituParams p{4.0f, 25.0f};
  for (int64_t n : kLengths) {
    for (Outs o : {Outs{true, true, false}, Outs{true, false, false}, Outs{false, true, false}}) {
      // Past both soft caps: gate to ±12 (β₁ = 4), up to ±60 (β₂ = 25).
      const auto a = random_vec(rng, n, -12.0f, 12.0f), b = random_vec(rng, n, -60.0f, 60.0f);
      const auto dout = random_vec(rng, n);
      auto da = random_vec(rng, n), db = random_vec(rng, n);
      std::vector<float> out(n);
      DevBuf d_a = upload(a), d_b = upload(b), d_dout = upload(dout), d_da = upload(da);
      DevBuf d_db = upload(db), d_out(n);
      k3::kSituGluOp.cpu(a.data(), b.data(), n, p, out.data());
      k3::kSituGluOp.bwd(a.data(), b.data(), n, p, dout.data(), or_null(da, o.a), or_null(db, o.b));
      gpu::situ_glu_fwd(d_a.data(), d_b.data(), n, p, d_out.data());
      gpu::situ_glu_bwd(d_a.data(), d_b.data(), n, p, d_dout.data(), or_null(d_da, o.a),
                        or_null(d_db, o.b));
      EXPECT_LE(rel_err(download(d_out), out), kTol) << n << " out";
      EXPECT_LE(rel_err(download(d_da), da), kTol) << n << " dgate";
      EXPECT_LE(rel_err(download(d_db), db), kTol) << n << " dup";
    }
  }
}

// ---- KDA gate ----

struct GateShape {
  int64_t rows, H, K;
};
// Channels fewer than, not a multiple of and many times a warp; no rows.
const GateShape kGateShapes[] = {{1, 1, 1}, {3, 2, 3}, {5, 3, 257}, {17, 4, 64}, {0, 2, 4}};
constexpr float kLowerBound = -5.0f;

void check_gate(std::mt19937_64& rng, GateShape s, Outs o) {
  const int64_t n = s.rows * s.H * s.K;
  const auto f = random_vec(rng, n, -2.0f, 2.0f), A_log = random_vec(rng, s.H);
  const auto dt_bias = random_vec(rng, s.H * s.K), dg = random_vec(rng, n);
  auto df = random_vec(rng, n), dA = random_vec(rng, s.H), ddt = random_vec(rng, s.H * s.K);
  std::vector<float> g(n);
  DevBuf d_f = upload(f), d_A = upload(A_log), d_dt = upload(dt_bias), d_dg = upload(dg);
  DevBuf d_df = upload(df), d_dA = upload(dA), d_ddt = upload(ddt), d_g(n);
  const KdaGateShape cs{s.rows, s.H, s.K, kLowerBound};
  k3::kda_gate(f.data(), A_log.data(), dt_bias.data(), cs, g.data());
  k3::kda_gate_bwd(f.data(), A_log.data(), dt_bias.data(), cs, dg.data(), or_null(df, o.a),
                   or_null(dA, o.b), or_null(ddt, o.c));
  gpu::kda_gate_fwd(d_f.data(), d_A.data(), d_dt.data(), s.rows, s.H, s.K, kLowerBound, d_g.data());
  gpu::kda_gate_bwd(d_f.data(), d_A.data(), d_dt.data(), s.rows, s.H, s.K, kLowerBound, d_dg.data(),
                    or_null(d_df, o.a), or_null(d_dA, o.b), or_null(d_ddt, o.c));
  const auto at = testing::Message() << s.rows << "x" << s.H << "x" << s.K;
  EXPECT_LE(rel_err(download(d_g), g), kTol) << at << " g";
  EXPECT_LE(rel_err(download(d_df), df), kTol) << at << " df";
  EXPECT_LE(rel_err(download(d_dA), dA), kTol) << at << " dA_log";
  EXPECT_LE(rel_err(download(d_ddt), ddt), kTol) << at << " ddt_bias";
}

TEST(TrainCudaRowwise, KdaGate) {
  K3_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(10);
  for (GateShape s : kGateShapes) {
    for (Outs o : {Outs{true, true, true}, Outs{true, false, false}, Outs{false, true, false},
                   Outs{false, false, true}})
      check_gate(rng, s, o);
  }
  // 2100 · 8 · 1024 values exceed one pass of the biases' row scratch: two passes of rows.
  check_gate(rng, {2100, 8, 1024}, {true, true, true});
}

// ---- cross-entropy ----

TEST(TrainCudaRowwise, CrossEntropy) {
  K3_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(11);
  const RowShape shapes[] = {{1, 1}, {3, 3}, {4, 257}, {5, 1000}, {3, 32768}, {0, 7}};
  for (const auto [rows, V] : shapes) {
    auto logits = random_vec(rng, rows * V, -8.0f, 8.0f);
    for (int64_t r = 0; r < rows; ++r) {  // rows shifted by −60, 0, +60 in turn (the max's job)
      for (int64_t v = 0; v < V; ++v) logits[r * V + v] += 60.0f * static_cast<float>(r % 3 - 1);
    }
    std::vector<int64_t> targets(rows);
    for (int64_t& t : targets) t = static_cast<int64_t>(rng() % V);
    const auto dloss = random_vec(rng, rows);
    auto dlogits = random_vec(rng, rows * V);
    std::vector<float> loss(rows);
    DevBuf d_logits = upload(logits), d_dloss = upload(dloss), d_dlogits = upload(dlogits);
    DevBuf d_loss(rows);
    DevArray<int64_t> d_targets = upload(targets);
    k3::cross_entropy(logits.data(), targets.data(), rows, V, loss.data());
    k3::cross_entropy_bwd(logits.data(), targets.data(), rows, V, dloss.data(), dlogits.data());
    gpu::cross_entropy_fwd(d_logits.data(), d_targets.data(), rows, V, d_loss.data());
    gpu::cross_entropy_bwd(d_logits.data(), d_targets.data(), rows, V, d_dloss.data(),
                           d_dlogits.data());
    EXPECT_LE(rel_err(download(d_loss), loss), kTol) << rows << "x" << V << " loss";
    EXPECT_LE(rel_err(download(d_dlogits), dlogits), kTol) << rows << "x" << V << " dlogits";
  }
}

// ---- embedding ----

TEST(TrainCudaRowwise, Embed) {
  K3_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(12);
  struct Shape {
    int64_t rows, d, vocab;
  };
  const Shape shapes[] = {{1, 1, 1},      {3, 3, 2},          {257, 5, 7},
                          {1000, 33, 50}, {16384, 256, 8192}, {0, 4, 4}};
  for (const Shape s : shapes) {
    const auto table = random_vec(rng, s.vocab * s.d), dout = random_vec(rng, s.rows * s.d);
    auto dtable = random_vec(rng, s.vocab * s.d);
    std::vector<int64_t> ids(s.rows);
    for (int64_t& id : ids) {  // half the rows on a few ids: long runs of repeats
      id = static_cast<int64_t>(rng() % 2 == 0 ? rng() % 4 % s.vocab : rng() % s.vocab);
    }
    std::vector<float> out(s.rows * s.d);
    const Mat m{s.vocab, s.d, MatFormat::f32, table.data()};
    k3::embed_rows(m, ids.data(), s.rows, out.data());
    DevBuf d_table = upload(table), d_dout = upload(dout), d_dtable = upload(dtable);
    k3::embed_rows_bwd(ids.data(), s.rows, s.d, dout.data(), dtable.data());  // after the upload
    DevBuf d_out(s.rows * s.d);
    DevArray<int64_t> d_ids = upload(ids);
    gpu::embed_fwd(d_table.data(), d_ids.data(), s.rows, s.d, d_out.data());
    gpu::embed_bwd(d_ids.data(), s.rows, s.d, s.vocab, d_dout.data(), d_dtable.data());
    // Both exact: a copy, and the same float additions in the same (row) order as the CPU.
    EXPECT_EQ(download(d_out), out) << s.rows << "x" << s.d << " vocab " << s.vocab;
    EXPECT_EQ(download(d_dtable), dtable) << s.rows << "x" << s.d << " vocab " << s.vocab;
  }
}

// ---- determinism: gradients summed over rows give the same bits on every run ----

TEST(TrainCudaRowwise, SummedGradientsRepeatBitForBit) {
  K3_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(13);
  const int64_t rows = 513, n = 300, H = 4, K = 75;
  DevBuf x = upload(random_vec(rng, rows * n)), w = upload(random_vec(rng, n));
  DevBuf dy = upload(random_vec(rng, rows * n));
  DevBuf A_log = upload(random_vec(rng, H)), dt_bias = upload(random_vec(rng, H * K));
  std::vector<float> first_dw, first_dA, first_ddt;
  for (int run = 0; run < 3; ++run) {
    DevBuf dw(n), dA(H), ddt(H * K);
    gpu::rms_norm_bwd(x.data(), rows, n, w.data(), kEps, dy.data(), nullptr, dw.data());
    // x and dy reread as f [rows, H, K] and dg (rows · n = rows · H · K).
    gpu::kda_gate_bwd(x.data(), A_log.data(), dt_bias.data(), rows, H, K, kLowerBound, dy.data(),
                      nullptr, dA.data(), ddt.data());
    if (run == 0) {
      first_dw = download(dw), first_dA = download(dA), first_ddt = download(ddt);
      continue;
    }
    EXPECT_EQ(download(dw), first_dw) << "run " << run;
    EXPECT_EQ(download(dA), first_dA) << "run " << run;
    EXPECT_EQ(download(ddt), first_ddt) << "run " << run;
  }
}

}  // namespace
}  // namespace k3::train::gpu::test

#endif  // K3_HAVE_CUDA
