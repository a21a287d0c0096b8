#include "model/forward.h"

#include <algorithm>
#include <cstdlib>

#include "core/error.h"
#include "model/layers.h"
#include "ops/ops.h"

namespace k3 {
namespace {

// The AttnRes residual stream of a step: sealed slots B (each [T, d]) and the open prefix
// sum P, all preallocated for the step.
class Residual {
 public:
  Residual(int64_t n_blocks, int64_t T, int64_t d, Ctx& ctx)
      : ctx_(ctx),
        slots_(ctx.host().alloc<Tensor>(n_blocks + 1)),
        cands_(ctx.host().alloc<const float*>(n_blocks + 1)) {
    for (int64_t i = 0; i <= n_blocks; ++i) slots_[i] = ctx.tensor({T, d});
  }
  const Tensor& P() const { return slots_[n_sealed_]; }  // the open slot
  bool empty() const { return n_sealed_ == 0; }
  void mark_filled() { p_empty_ = false; }
  // rms_norm(Mix(P, B), w_norm) over [slots..., P] (P last, unless just sealed): the next
  // sublayer's input, the mix itself never stored.
  void mix_norm(const Vec& w, const Vec& w_norm, float eps, const Tensor& out) const {
    const int64_t n = n_sealed_ + (p_empty_ ? 0 : 1);
    for (int64_t i = 0; i < n; ++i) cands_[i] = slots_[i].f32();
    op::attn_res_norm(ctx_, {cands_, static_cast<size_t>(n)}, out, w, w_norm, eps);
  }
  void seal() {
    ++n_sealed_;
    p_empty_ = true;
  }
  // P += x (P = x when just sealed).
  void add(const Tensor& x) {
    if (p_empty_) {
      op::copy(ctx_, x, P());
    } else {
      op::add(ctx_, P(), x, P());
    }
    p_empty_ = false;
  }
  // The stream restricted to `rows` (for the final mix of the rows that need logits).
  Residual gather(std::span<const int32_t> rows) const {
    const int64_t R = static_cast<int64_t>(rows.size()), d = P().dim(1);
    Residual g(n_sealed_, R, d, ctx_);
    int64_t* rows64 = ctx_.host().alloc<int64_t>(R);
    std::copy(rows.begin(), rows.end(), rows64);
    const int64_t n = n_sealed_ + (p_empty_ ? 0 : 1);
    for (int64_t i = 0; i < n; ++i) {
      op::gather_rows(ctx_, slots_[i], {rows64, static_cast<size_t>(R)}, g.slots_[i]);
    }
    g.n_sealed_ = n_sealed_;
    g.p_empty_ = p_empty_;
    return g;
  }

 private:
  Ctx& ctx_;
  Tensor* slots_;        // [n_blocks + 1] of [T, d]
  const float** cands_;  // scratch for mix()
  int64_t n_sealed_ = 0;
  bool p_empty_ = true;
};

// On a device, logits of at least this many bytes come back in kLogitChunks pieces, overlapping
// the LM head (K3_LOGIT_CHUNK_BYTES overrides the bound: the GPU tests set 1 to run the chunked
// path on the golden cases' small vocabularies).
constexpr int64_t kLogitChunks = 8;
int64_t chunked_logits_bytes() {
  const char* v = std::getenv("K3_LOGIT_CHUNK_BYTES");
  return v != nullptr && *v != 0 ? std::atoll(v) : int64_t{4} << 20;
}

// Rows [r0, r0 + n) of w: a view of the same storage.
Mat mat_rows(const Mat& w, int64_t r0, int64_t n) {
  Mat v = w;
  v.rows = n;
  const auto* base = static_cast<const uint8_t*>(w.data);
  switch (w.format) {
    case MatFormat::f32:
      v.data = base + r0 * w.cols * 4;
      break;
    case MatFormat::bf16:
      v.data = base + r0 * w.cols * 2;
      break;
    case MatFormat::mxfp4:
      v.data = base + r0 * w.cols / 2;
      v.scales = w.scales + r0 * (w.cols / 32);
      break;
  }
  return v;
}

int64_t count_seals(const HParams& hp) {
  int64_t n = 0;
  for (int64_t l = 0; l < hp.n_layer; ++l) n += hp.seals_slot(l);
  return n;
}

}  // namespace

void forward_step(const ModelWeights& w, const HParams& hp, const StepPlan& plan, StatePool& pool,
                  Ctx& ctx, const StepIO& io) {
  CtxScope scope(ctx);
  const int64_t T = plan.T, d = hp.d_model;
  Residual res(count_seals(hp), T, d, ctx);
  op::embed(ctx, w.embed, {io.tokens, static_cast<size_t>(T)}, res.P());  // P = h
  res.mark_filled();
  Tensor x = ctx.tensor({T, d}), y = ctx.tensor({T, d});
  LayerCtx lc{plan, pool, ctx};
  int64_t kda_index = 0, mla_index = 0;
  for (int64_t l = 0; l < hp.n_layer; ++l) {
    // Layer 0 is not polled: the engine polls before the step, when nothing is written yet.
    if (l > 0 && io.cancel != nullptr && io.cancel->load(std::memory_order_relaxed)) {
      throw Cancelled(cat("cancelled before layer ", l, " of a ", T, "-token step"));
    }
    const LayerWeights& lw = w.layers[l];
    // 1-3. the normalised pre-attention mix (layer 0: of h itself), then seal the block's
    // prefix sum.
    if (res.empty()) {
      op::rms_norm(ctx, res.P(), lw.attn_norm, hp.rms_eps, x);
    } else {
      res.mix_norm(lw.attn_res, lw.attn_norm, hp.rms_eps, x);
    }
    if (hp.seals_slot(l)) res.seal();
    // 4. attention; P += A.
    if (hp.attn_kind[l] == AttnKind::kda) {
      kda_layer(x, lw.kda, hp, kda_index++, lc, y);
    } else {
      mla_layer(x, lw.mla, hp, mla_index++, lc, y);
    }
    res.add(y);
    // 5-7. FFN on the normalised MLP-side mix; P += F.
    res.mix_norm(lw.mlp_res, lw.ffn_norm, hp.rms_eps, x);
    if (hp.is_moe_layer(l)) {
      moe_block(x, lw.moe, hp, ctx, y);
    } else {
      dense_ffn(x, lw.dense, hp, ctx, y);
    }
    res.add(y);
  }
  // Final mix over all slots + P, norm and LM head: only on the rows that need logits.
  const int64_t R = io.n_logits;
  if (R == 0) return;
  Residual out = res.gather({io.logit_rows, static_cast<size_t>(R)});
  Tensor xr = ctx.tensor({R, d});
  out.mix_norm(w.out_res, w.norm, hp.rms_eps, xr);
  if (ctx.backend.device() == Device::cpu) {
    op::linear(ctx, xr, w.lm_head, Tensor::of(io.logits, {R, hp.vocab}));
    return;
  }
  const int64_t V = hp.vocab;
  if (R * V * 4 < chunked_logits_bytes()) {
    Tensor logits = ctx.tensor({R, V});
    op::linear(ctx, xr, w.lm_head, logits);
    ctx.backend.copy_to_host(io.logits, logits.data, static_cast<size_t>(R * V) * 4);
    return;
  }
  // Many rows (42 MB of logits at 64 sequences): the LM head in vocabulary chunks, each chunk's
  // logits on their way to the host while the next one is computed; the weights are still read
  // once. The chunk buffers stay allocated (this scope) until the sync.
  const int64_t vc = (V / kLogitChunks + 63) / 64 * 64;
  for (int64_t v0 = 0; v0 < V; v0 += vc) {
    const int64_t n = std::min(vc, V - v0);
    Tensor chunk = ctx.tensor({R, n});
    op::linear(ctx, xr, mat_rows(w.lm_head, v0, n), chunk);
    ctx.backend.copy_rows_to_host_async(io.logits + v0, static_cast<size_t>(V) * 4, chunk.data,
                                        static_cast<size_t>(n) * 4, static_cast<size_t>(n) * 4,
                                        static_cast<size_t>(R));
  }
  ctx.backend.sync();
}

}  // namespace k3
