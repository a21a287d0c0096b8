#include "train/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>

#include "core/parallel.h"
#include "k3/error.h"
#include "train/newton_schulz.h"

namespace k3::train {
namespace {

size_t at(int64_t i) { return static_cast<size_t>(i); }

// Copies block h of a [rows, cols] matrix split into `heads` blocks along `axis` into
// out[br, bc], or (back = true) copies out back into the block.
void head_block(float* m, int64_t rows, int64_t cols, HeadAxis axis, int64_t heads, int64_t h,
                float* out, bool back) {
  const int64_t br = axis == HeadAxis::rows ? rows / heads : rows;
  const int64_t bc = axis == HeadAxis::cols ? cols / heads : cols;
  const int64_t r0 = axis == HeadAxis::rows ? h * br : 0, c0 = axis == HeadAxis::cols ? h * bc : 0;
  for (int64_t r = 0; r < br; ++r) {
    float* row = m + at((r0 + r) * cols + c0);
    float* blk = out + at(r * bc);
    if (back) {
      std::copy(blk, blk + bc, row);
    } else {
      std::copy(row, row + bc, blk);
    }
  }
}

}  // namespace

int64_t Param::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Optimizer::Optimizer(std::vector<Param> params, OptimizerConfig config)
    : params_(std::move(params)), cfg_(config) {
  m_.resize(params_.size());
  v_.resize(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const Param& p = params_[i];
    check(p.value && p.grad, "optimizer: parameter ", p.name, " has no value or gradient buffer");
    if (p.group.update == Update::frozen) continue;
    m_[i].assign(at(p.numel()), 0.0f);
    if (p.group.update == Update::adamw) v_[i].assign(at(p.numel()), 0.0f);
    if (p.group.update == Update::muon) {
      check(p.shape.size() == 2, "optimizer: Muon parameter ", p.name, " is not a matrix");
      const int64_t split = p.group.head_axis == HeadAxis::rows   ? p.shape[0]
                            : p.group.head_axis == HeadAxis::cols ? p.shape[1]
                                                                  : p.group.heads;
      check(p.group.heads >= 1 && split % p.group.heads == 0, "optimizer: ", p.name, " axis of ",
            split, " does not split into ", p.group.heads, " heads");
    }
  }
}

// Newton–Schulz on each block, side by side over the pool's threads, largest first (one block
// is too small to split well over threads).
void orthogonalize_on_host(std::span<const NsBlock> blocks, int steps, NsCoefficients coef) {
  std::vector<size_t> order(blocks.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return blocks[a].rows * blocks[a].cols > blocks[b].rows * blocks[b].cols;
  });
  parallel_for(static_cast<int64_t>(order.size()), true, [&](int64_t j) {
    const NsBlock& b = blocks[order[static_cast<size_t>(j)]];
    newton_schulz(b.in, b.out, b.rows, b.cols, steps, coef);
  });
}

// Each parameter's update reads and writes only its own tensors, so the order is free. The
// Muon matrices go in three phases (muon_step); AdamW's element-wise updates then split each
// tensor over the threads.
void Optimizer::step(float lr) {
  ++step_;
  muon_step(lr);
  for (size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].group.update == Update::adamw) adamw(i, lr);
  }
}

void Optimizer::adamw(size_t i, float lr) {
  const Param& p = params_[i];
  const float b1 = cfg_.adam_beta1, b2 = cfg_.adam_beta2;
  const double t = static_cast<double>(step_);
  const float c1 = static_cast<float>(1.0 / (1.0 - std::pow(double(b1), t)));
  const float c2 = static_cast<float>(1.0 / (1.0 - std::pow(double(b2), t)));
  const float decay = p.group.decay ? 1.0f - lr * cfg_.weight_decay : 1.0f;
  float *m = m_[i].data(), *v = v_[i].data();
  const int64_t n = p.numel();
  parallel_for(n, n >= (int64_t{1} << 16), [&](int64_t j) {
    const float g = p.grad[j];
    m[j] = b1 * m[j] + (1 - b1) * g;
    v[j] = b2 * v[j] + (1 - b2) * g * g;
    p.value[j] = p.value[j] * decay - lr * (m[j] * c1) / (std::sqrt(v[j] * c2) + cfg_.adam_eps);
  });
}

std::vector<float> Optimizer::muon_input(size_t i) {
  const Param& p = params_[i];
  const int64_t n = p.numel();
  const float mu = cfg_.muon_momentum;
  float* m = m_[i].data();
  std::vector<float> u(at(n));
  for (int64_t j = 0; j < n; ++j) {
    m[j] = mu * m[j] + p.grad[j];
    u[j] = cfg_.muon_nesterov ? p.grad[j] + mu * m[j] : m[j];
  }
  return u;
}

namespace {

// A Muon matrix's head blocks [heads, br, bc] (one block when it has no head axis), and their
// orthogonalised forms.
struct MuonWork {
  int64_t heads = 1, br = 0, bc = 0;
  std::vector<float> blocks, ortho;
};

MuonWork muon_blocks(const Param& p, std::vector<float> u) {
  MuonWork w;
  const int64_t rows = p.shape[0], cols = p.shape[1];
  const HeadAxis axis = p.group.head_axis;
  w.heads = axis == HeadAxis::none ? 1 : p.group.heads;
  w.br = axis == HeadAxis::rows ? rows / w.heads : rows;
  w.bc = axis == HeadAxis::cols ? cols / w.heads : cols;
  w.blocks.resize(u.size());
  w.ortho.resize(u.size());
  for (int64_t h = 0; h < w.heads; ++h) {
    head_block(u.data(), rows, cols, axis, w.heads, h, w.blocks.data() + at(h * w.br * w.bc),
               false);
  }
  return w;
}

}  // namespace

// Muon in three phases: each matrix's momentum and head blocks (matrices side by side over the
// pool's threads); Newton–Schulz over every block of the step at once (the orthogonaliser: the
// host's threads, or the GPU); then each matrix's update from its orthogonalised blocks.
void Optimizer::muon_step(float lr) {
  std::vector<size_t> ids;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].group.update == Update::muon) ids.push_back(i);
  }
  const int64_t n_ids = static_cast<int64_t>(ids.size());
  std::vector<MuonWork> work(ids.size());
  parallel_for(n_ids, true, [&](int64_t j) {
    const size_t i = ids[at(j)];
    work[at(j)] = muon_blocks(params_[i], muon_input(i));
  });
  std::vector<NsBlock> blocks;
  for (MuonWork& w : work) {
    for (int64_t h = 0; h < w.heads; ++h) {
      const size_t off = at(h * w.br * w.bc);
      blocks.push_back({w.blocks.data() + off, w.ortho.data() + off, w.br, w.bc});
    }
  }
  if (!blocks.empty()) ortho_(blocks, cfg_.ns_steps, kNsQuintic);
  parallel_for(n_ids, true, [&](int64_t j) {
    const Param& p = params_[ids[at(j)]];
    MuonWork& w = work[at(j)];
    const int64_t rows = p.shape[0], cols = p.shape[1], n = p.numel();
    const float scale =
        lr * cfg_.muon_rms_scale * static_cast<float>(std::sqrt(double(std::max(w.br, w.bc))));
    std::vector<float> update(at(n));
    for (int64_t h = 0; h < w.heads; ++h) {
      head_block(update.data(), rows, cols, p.group.head_axis, w.heads, h,
                 w.ortho.data() + at(h * w.br * w.bc), true);
    }
    const float decay = p.group.decay ? 1.0f - lr * cfg_.weight_decay : 1.0f;
    for (int64_t k = 0; k < n; ++k) p.value[k] = p.value[k] * decay - scale * update[at(k)];
  });
}

void assign_groups(std::vector<Param>& params, const HParams& hp, bool per_head_muon) {
  for (Param& p : params) {
    p.group = param_group(p.name, hp, per_head_muon);
    check(p.group.update != Update::muon || p.shape.size() == 2, "optimizer: ", p.name,
          " is a Muon matrix in the weight table but has ", p.shape.size(), " dimensions here");
  }
}

namespace {

// The gradient element-wise passes split every tensor into pieces of kPiece elements, spread
// over the pool's threads (one serial pass over a 24 M-parameter model's gradients took tens of
// ms a step). The pieces are fixed by the shapes alone, so the norm's partial sums, added in
// piece order, give the same bits with any number of threads.
constexpr int64_t kPiece = int64_t{1} << 16;

struct Piece {
  float* grad;
  int64_t n;
  bool in_norm;  // not frozen: counted by the global norm
};

template <typename F>
void for_each_piece(const std::vector<Piece>& pieces, F&& fn) {
  const int64_t n = static_cast<int64_t>(pieces.size());
  parallel_for(n, n > 1, [&](int64_t i) { fn(i, pieces[at(i)]); });
}

std::vector<Piece> grad_pieces(std::span<const Param> params) {
  std::vector<Piece> pieces;
  for (const Param& p : params) {
    const int64_t n = p.numel();
    const bool in_norm = p.group.update != Update::frozen;
    for (int64_t b = 0; b < n; b += kPiece)
      pieces.push_back({p.grad + b, std::min(kPiece, n - b), in_norm});
  }
  return pieces;
}

// Scales every gradient by factor (1: left as is) and returns the global norm after, from
// partial sums per piece added in piece order.
double scale_and_norm(std::span<const Param> params, float factor) {
  const std::vector<Piece> pieces = grad_pieces(params);
  std::vector<double> partial(pieces.size(), 0.0);
  for_each_piece(pieces, [&](int64_t i, const Piece& pc) {
    if (factor != 1.0f) {
      for (int64_t j = 0; j < pc.n; ++j) pc.grad[j] *= factor;
    }
    if (!pc.in_norm) return;
    double sum = 0;
    for (int64_t j = 0; j < pc.n; ++j) sum += double(pc.grad[j]) * double(pc.grad[j]);
    partial[at(i)] = sum;
  });
  return std::sqrt(std::accumulate(partial.begin(), partial.end(), 0.0));
}

}  // namespace

double grad_global_norm(std::span<const Param> params) { return scale_and_norm(params, 1.0f); }

double clip_grad_norm(std::span<const Param> params, double max_norm) {
  return clip_to_norm(params, grad_global_norm(params), max_norm);
}

double scale_grads_and_clip(std::span<const Param> params, float factor, double max_norm) {
  return clip_to_norm(params, scale_and_norm(params, factor), max_norm);
}

double clip_to_norm(std::span<const Param> params, double norm, double max_norm) {
  check(std::isfinite(norm), "gradient norm is not finite (", norm, "): the step diverged");
  if (max_norm > 0 && norm > max_norm) scale_grads(params, static_cast<float>(max_norm / norm));
  return norm;
}

void scale_grads(std::span<const Param> params, float factor) {
  for_each_piece(grad_pieces(params), [&](int64_t, const Piece& pc) {
    for (int64_t j = 0; j < pc.n; ++j) pc.grad[j] *= factor;
  });
}

void zero_grads(std::span<const Param> params) {
  for_each_piece(grad_pieces(params),
                 [&](int64_t, const Piece& pc) { std::fill(pc.grad, pc.grad + pc.n, 0.0f); });
}

}  // namespace k3::train
