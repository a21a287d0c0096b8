// Tensor bindings: check the contract, then dispatch to the registered launcher.
#include "ops/ops.h"

#include "core/parallel.h"
#include "core/precision.h"
#include "ops/attn_res/attn_res.h"
#include "ops/conv1d/conv1d.h"
#include "ops/copy/copy.h"
#include "ops/elementwise/elementwise.h"
#include "ops/embed/embed.h"
#include "ops/fill/fill.h"
#include "ops/kda/kda.h"
#include "ops/kda/kda_gate.h"
#include "ops/moe/moe_combine.h"
#include "ops/norm/norm.h"

namespace k3::op {
namespace {

// Rows and width of a tensor viewed as [rows, last dim], every row contiguous.
struct RowsView {
  int64_t rows, n, ld;
};
RowsView rows_of(const Tensor& t, const char* op, const char* name) {
  check(t.dtype == DType::f32, op, ": ", name, " must be f32, found ", dtype_name(t.dtype));
  check(t.ndim >= 1 && t.stride[t.ndim - 1] == 1, op, ": ", name,
        " must have unit stride in its last dimension");
  const int64_t n = t.dim(-1), rows = n == 0 ? 0 : t.numel() / n;
  // Outer dims must collapse to one row stride (all but the last dim contiguous together).
  int64_t ld = t.ndim >= 2 ? t.stride[t.ndim - 2] : n;
  for (int d = t.ndim - 3; d >= 0; --d) {
    check(t.stride[d] == t.stride[d + 1] * t.shape[d + 1], op, ": ", name,
          " rows are not evenly strided");
  }
  check(rows <= 1 || ld >= n, op, ": ", name, " rows overlap (row stride ", ld, " < width ", n,
        ")");
  return {rows, n, ld};
}

void same_shape(const Tensor& a, const Tensor& b, const char* op) {
  check(a.numel() == b.numel() && a.dim(-1) == b.dim(-1), op, ": shapes differ (", a.numel(),
        " vs ", b.numel(), " elements)");
}

void contiguous_f32(const Tensor& t, const char* op, const char* name) {
  check(t.dtype == DType::f32 && t.is_contiguous(), op, ": ", name,
        " must be a contiguous f32 tensor");
}

}  // namespace

void embed(Ctx& ctx, const Mat& table, std::span<const int64_t> ids, const Tensor& out) {
  contiguous_f32(out, "embed", "out");
  const int64_t T = static_cast<int64_t>(ids.size());
  check(out.numel() == T * table.cols, "embed: out is not [", T, ", ", table.cols, "]");
  kEmbedOp.on(ctx)(table, ids.data(), T, out.f32());
}

void fill(Ctx& ctx, const Tensor& y, float value) {
  contiguous_f32(y, "fill", "y");
  kFillOp.on(ctx)(y.f32(), y.numel(), value);
}

void copy(Ctx& ctx, const Tensor& src, const Tensor& dst) {
  check(src.dtype == DType::f32 && dst.dtype == DType::f32, "copy: f32 tensors only");
  check(src.ndim == dst.ndim, "copy: ", src.ndim, "-D source into a ", dst.ndim, "-D destination");
  CopyShape s;
  const int lead = Tensor::kMaxDims - src.ndim;  // right-align into the 4-D shape
  for (int d = 0; d < src.ndim; ++d) {
    check(src.shape[d] == dst.shape[d], "copy: dimension ", d, " is ", src.shape[d],
          " in the source and ", dst.shape[d], " in the destination");
    s.shape[lead + d] = src.shape[d];
    s.src_stride[lead + d] = src.stride[d];
    s.dst_stride[lead + d] = dst.stride[d];
  }
  kCopyOp.on(ctx)(src.f32(), s, dst.f32());
}

void scatter_rows(Ctx& ctx, const Tensor& src, std::span<float* const> dst_rows) {
  contiguous_f32(src, "scatter_rows", "src");
  const int64_t n = static_cast<int64_t>(dst_rows.size());
  const int64_t width = src.ndim == 0 ? 1 : src.dim(-1);
  check(src.numel() == n * width, "scatter_rows: src has ", src.numel(), " elements for ", n,
        " rows of ", width);
  for (float* p : dst_rows) check(p != nullptr, "scatter_rows: a destination row is null");
  kScatterRowsOp.on(ctx)(src.f32(), n, width, dst_rows.data());
}

void gather_rows(Ctx& ctx, const Tensor& src, std::span<const int64_t> rows, const Tensor& dst) {
  contiguous_f32(src, "gather_rows", "src");
  contiguous_f32(dst, "gather_rows", "dst");
  const int64_t width = src.dim(-1), n = static_cast<int64_t>(rows.size());
  check(dst.numel() == n * width, "gather_rows: dst is not [", n, ", ", width, "]");
  for (int64_t r : rows)
    check(r >= 0 && r < src.numel() / width, "gather_rows: row ", r, " is outside the source");
  kGatherRowsOp.on(ctx)(src.f32(), rows.data(), n, width, dst.f32());
}

void linear(Ctx& ctx, const Tensor& x, const Mat& w, const Tensor& y) {
  contiguous_f32(x, "linear", "x");
  contiguous_f32(y, "linear", "y");
  const int64_t T = x.dim(0);
  check(x.dim(-1) == w.cols && y.dim(-1) == w.rows && y.dim(0) == T && x.numel() == T * w.cols &&
            y.numel() == T * w.rows,
        "linear: x [", T, ", ", x.dim(-1), "] · W [", w.rows, ", ", w.cols, "]ᵀ -> y [", y.dim(0),
        ", ", y.dim(-1), "]");
  kLinearOp.on(ctx)(x.f32(), T, w, y.f32());
}

void linear_multi(Ctx& ctx, const Tensor& x, std::initializer_list<const Mat*> ws,
                  std::initializer_list<Tensor> ys) {
  check(ws.size() == ys.size(), "linear_multi: ", ws.size(), " matrices, ", ys.size(), " outputs");
  contiguous_f32(x, "linear_multi", "x");
  const int64_t T = x.dim(0), n = static_cast<int64_t>(ws.size());
  Mat* mats = ctx.host().alloc<Mat>(n);
  float** outs = ctx.host().alloc<float*>(n);
  int64_t i = 0;
  for (const Tensor& y : ys) {
    const Mat& w = *ws.begin()[i];
    contiguous_f32(y, "linear_multi", "y");
    check(x.dim(-1) == w.cols && y.dim(-1) == w.rows && y.dim(0) == T && x.numel() == T * w.cols &&
              y.numel() == T * w.rows,
          "linear_multi: x [", T, ", ", x.dim(-1), "] · W", i, " [", w.rows, ", ", w.cols,
          "]ᵀ -> y [", y.dim(0), ", ", y.dim(-1), "]");
    mats[i] = w;
    outs[i++] = y.f32();
  }
  kLinearMultiOp.on(ctx)(x.f32(), T, mats, outs, n);
}

void rms_norm(Ctx& ctx, const Tensor& x, Weights w, float eps, const Tensor& y) {
  const RowsView rx = rows_of(x, "rms_norm", "x"), ry = rows_of(y, "rms_norm", "y");
  check(static_cast<int64_t>(w.size()) == rx.n && ry.n == rx.n && ry.rows == rx.rows,
        "rms_norm: x [", rx.rows, ", ", rx.n, "], y [", ry.rows, ", ", ry.n, "], w [", w.size(),
        "]");
  if (rx.ld == rx.n && ry.ld == ry.n) {
    kRmsNormOp.on(ctx)(x.f32(), rx.rows, rx.n, w.data(), eps, y.f32());
    return;
  }
  if (ctx.backend.device() != Device::cpu) {  // strided rows on a device: one launch, not T
    CtxScope scope(ctx);
    Tensor tx = ctx.tensor({rx.rows, rx.n}), ty = ctx.tensor({rx.rows, rx.n});
    copy(ctx, Tensor::strided(x.data, DType::f32, {rx.rows, rx.n}, {rx.ld, 1}, x.device), tx);
    kRmsNormOp.on(ctx)(tx.f32(), rx.rows, rx.n, w.data(), eps, ty.f32());
    copy(ctx, ty, Tensor::strided(y.data, DType::f32, {ry.rows, ry.n}, {ry.ld, 1}, y.device));
    return;
  }
  // Strided rows (the latent part of MLA's kv_a output): one row at a time.
  for (int64_t i = 0; i < rx.rows; ++i)
    kRmsNormOp.on(ctx)(x.f32() + i * rx.ld, 1, rx.n, w.data(), eps, y.f32() + i * ry.ld);
}

void gated_rms_norm(Ctx& ctx, const Tensor& x, const Tensor& z, Weights w, float eps,
                    const Tensor& y) {
  for (const Tensor* t : {&x, &z, &y}) contiguous_f32(*t, "gated_rms_norm", "x/z/y");
  same_shape(x, z, "gated_rms_norm");
  same_shape(x, y, "gated_rms_norm");
  const int64_t n = x.dim(-1);
  check(static_cast<int64_t>(w.size()) == n, "gated_rms_norm: weight of ", w.size(),
        " for rows of ", n);
  kGatedRmsNormOp.on(ctx)(x.f32(), z.f32(), x.numel() / n, n, w.data(), eps, y.f32());
}

void l2_norm(Ctx& ctx, const Tensor& x, float eps, const Tensor& y) {
  contiguous_f32(x, "l2_norm", "x");
  contiguous_f32(y, "l2_norm", "y");
  same_shape(x, y, "l2_norm");
  kL2NormOp.on(ctx)(x.f32(), x.numel() / x.dim(-1), x.dim(-1), eps, y.f32());
}

void sigmoid(Ctx& ctx, const Tensor& x, const Tensor& y) {
  contiguous_f32(x, "sigmoid", "x");
  contiguous_f32(y, "sigmoid", "y");
  same_shape(x, y, "sigmoid");
  kSigmoidOp.on(ctx)(x.f32(), x.numel(), y.f32());
}

void scale(Ctx& ctx, const Tensor& x, float s, const Tensor& y) {
  contiguous_f32(x, "scale", "x");
  contiguous_f32(y, "scale", "y");
  same_shape(x, y, "scale");
  kScaleOp.on(ctx)(x.f32(), x.numel(), s, y.f32());
}

void add(Ctx& ctx, const Tensor& a, const Tensor& b, const Tensor& y) {
  for (const Tensor* t : {&a, &b, &y}) contiguous_f32(*t, "add", "a/b/y");
  same_shape(a, b, "add");
  same_shape(a, y, "add");
  kAddOp.on(ctx)(a.f32(), b.f32(), a.numel(), y.f32());
}

void mul_sigmoid(Ctx& ctx, const Tensor& x, const Tensor& gate, const Tensor& y) {
  for (const Tensor* t : {&x, &gate, &y}) contiguous_f32(*t, "mul_sigmoid", "x/gate/y");
  same_shape(x, gate, "mul_sigmoid");
  same_shape(x, y, "mul_sigmoid");
  kMulSigmoidOp.on(ctx)(x.f32(), gate.f32(), x.numel(), y.f32());
}

void situ_glu(Ctx& ctx, const Tensor& gate, const Tensor& up, SituParams p, const Tensor& y) {
  for (const Tensor* t : {&gate, &up, &y}) contiguous_f32(*t, "situ_glu", "gate/up/y");
  same_shape(gate, up, "situ_glu");
  same_shape(gate, y, "situ_glu");
  kSituGluOp.on(ctx)(gate.f32(), up.f32(), gate.numel(), p, y.f32());
}

void conv1d_silu(Ctx& ctx, const Tensor& x, Weights taps, int64_t W, float* state,
                 const Tensor& y) {
  contiguous_f32(x, "conv1d_silu", "x");
  contiguous_f32(y, "conv1d_silu", "y");
  same_shape(x, y, "conv1d_silu");
  const int64_t C = x.dim(-1);
  check(static_cast<int64_t>(taps.size()) == C * W, "conv1d_silu: ", taps.size(), " taps for ", C,
        " channels of width ", W);
  kConv1dSiluOp.on(ctx)(x.f32(), taps.data(), state, {x.numel() / C, C, W}, y.f32());
}

void conv1d_silu_batch(Ctx& ctx, const Tensor& x, Weights taps, int64_t W,
                       std::span<const Conv1dSeq> seqs, const Tensor& y) {
  contiguous_f32(x, "conv1d_silu_batch", "x");
  contiguous_f32(y, "conv1d_silu_batch", "y");
  same_shape(x, y, "conv1d_silu_batch");
  const int64_t C = x.dim(-1), T = C == 0 ? 0 : x.numel() / C;
  check(static_cast<int64_t>(taps.size()) == C * W, "conv1d_silu_batch: ", taps.size(),
        " taps for ", C, " channels of width ", W);
  for (const Conv1dSeq& q : seqs) {
    check(q.t0 >= 0 && q.n >= 0 && q.t0 + q.n <= T, "conv1d_silu_batch: rows ", q.t0, " + ", q.n,
          " outside the step's ", T);
    check(q.state != nullptr || q.n == 0, "conv1d_silu_batch: a sequence has no state");
  }
  kConv1dSiluBatchOp.on(ctx)(x.f32(), taps.data(), seqs.data(), static_cast<int64_t>(seqs.size()),
                             {T, C, W}, y.f32());
}

void kda_gate(Ctx& ctx, const Tensor& f, Weights A_log, Weights dt_bias, float lower_bound,
              const Tensor& g) {
  contiguous_f32(f, "kda_gate", "f");
  contiguous_f32(g, "kda_gate", "g");
  same_shape(f, g, "kda_gate");
  check(f.ndim == 3, "kda_gate: f must be [T, H, K]");
  const int64_t T = f.dim(0), H = f.dim(1), K = f.dim(2);
  check(static_cast<int64_t>(A_log.size()) >= H && static_cast<int64_t>(dt_bias.size()) == H * K,
        "kda_gate: A_log / dt_bias sizes");
  kKdaGateOp.on(ctx)(f.f32(), A_log.data(), dt_bias.data(), {T, H, K, lower_bound}, g.f32());
}

void kda(Ctx& ctx, const KdaTensors& in, std::span<const KdaSeq> seqs, const Tensor& o) {
  for (const Tensor* t : {&in.q, &in.k, &in.v, &in.g, &in.beta, &o})
    contiguous_f32(*t, "kda", "inputs");
  check(in.q.ndim == 3 && in.v.ndim == 3, "kda: q and v must be [T, H, D]");
  const int64_t H = in.q.dim(1), K = in.q.dim(2), V = in.v.dim(2);
  const KdaInputs all{in.q.f32(), in.k.f32(), in.v.f32(), in.g.f32(), in.beta.f32()};
  // Every prompt chunk of the step in one call (one launch on the device).
  KdaBatchSeq* chunks = ctx.host().alloc<KdaBatchSeq>(seqs.size());
  int64_t n_chunks = 0;
  for (const KdaSeq& s : seqs) {
    if (s.n > 1) chunks[n_chunks++] = {s.t0, s.n, s.S};
  }
  if (n_chunks > 0) kKdaChunkedBatchOp.on(ctx)(all, chunks, n_chunks, {0, H, K, V}, o.f32());
  // All single-token sequences in one call (one parallel loop, or one launch).
  KdaDecodeSeq* decode = ctx.host().alloc<KdaDecodeSeq>(seqs.size());
  int64_t n_decode = 0;
  for (const KdaSeq& s : seqs) {
    if (s.n == 1) decode[n_decode++] = {s.t0, s.S};
  }
  if (n_decode > 0) kKdaDecodeOp.on(ctx)(all, decode, n_decode, {0, H, K, V}, o.f32());
}

void mla_expanded(Ctx& ctx, const Tensor& q, const Tensor& k, const Tensor& v, MlaShape s,
                  const Tensor& o) {
  for (const Tensor* t : {&q, &k, &v, &o}) contiguous_f32(*t, "mla_expanded", "q/k/v/o");
  check(q.numel() == s.T * s.H * (s.Dn + s.Dr) && o.numel() == s.T * s.H * s.Dv &&
            k.numel() == (s.n_past + s.T) * s.H * (s.Dn + s.Dr) &&
            v.numel() == (s.n_past + s.T) * s.H * s.Dv,
        "mla_expanded: tensor sizes do not match the shape");
  kMlaExpandedOp.on(ctx)(q.f32(), k.f32(), v.f32(), s, o.f32());
}

void mla_absorbed(Ctx& ctx, const Tensor& q, std::span<const MlaSeq> seqs,
                  const MlaAbsorbedWeights& w, MlaShape dims, const Tensor& o) {
  contiguous_f32(q, "mla_absorbed", "q");
  contiguous_f32(o, "mla_absorbed", "o");
  const int64_t H = dims.H, Dq = dims.Dn + dims.Dr, Dv = dims.Dv;
  if (ctx.backend.device() == Device::cuda && kMlaAbsorbedBatchOp.cuda != nullptr) {
    // All sequences in one split-KV launch.
    kMlaAbsorbedBatchOp.cuda(q.f32(), seqs.data(), static_cast<int64_t>(seqs.size()), w, dims,
                             o.f32());
    return;
  }
  auto* head = mla_attention_absorbed_head;  // the cpu launcher, one head at a time
  const int64_t items = static_cast<int64_t>(seqs.size()) * H;
  int64_t work = 0;  // multiply-adds: each head's two projections and its scores over the cache
  for (const MlaSeq& s : seqs)
    work += H * s.n * (dims.Dc * (dims.Dn + dims.Dv) + (s.n_past + s.n) * (dims.Dc + dims.Dr));
  parallel_for(items, items > 1 && work > kMlaParallelWork, [&](int64_t it) {
    const MlaSeq& s = seqs[it / H];
    MlaShape sh = dims;
    sh.T = s.n;
    sh.n_past = s.n_past;
    head(q.f32() + s.t0 * H * Dq, s.cache, w, sh, it % H, o.f32() + s.t0 * H * Dv);
  });
}

void attn_res_mix(Ctx& ctx, std::span<const float* const> cands, const Tensor& out, Weights w,
                  float eps) {
  contiguous_f32(out, "attn_res_mix", "out");
  const int64_t d = out.dim(-1);
  check(static_cast<int64_t>(w.size()) == d && !cands.empty(), "attn_res_mix: shapes");
  kAttnResMixOp.on(ctx)(cands.data(), {static_cast<int64_t>(cands.size()), out.numel() / d, d},
                        w.data(), eps, out.f32());
}

void attn_res_norm(Ctx& ctx, std::span<const float* const> cands, const Tensor& out, Weights w,
                   Weights w_norm, float eps) {
  contiguous_f32(out, "attn_res_norm", "out");
  const int64_t d = out.dim(-1);
  check(static_cast<int64_t>(w.size()) == d && static_cast<int64_t>(w_norm.size()) == d &&
            !cands.empty(),
        "attn_res_norm: shapes");
  kAttnResNormOp.on(ctx)(cands.data(), {static_cast<int64_t>(cands.size()), out.numel() / d, d},
                         w.data(), w_norm.data(), eps, out.f32());
}

void route(Ctx& ctx, const Tensor& logits, Weights bias, RouterParams p, const Tensor& sel,
           const Tensor& weight) {
  contiguous_f32(logits, "route", "logits");
  contiguous_f32(weight, "route", "weight");
  const int64_t T = logits.dim(0);
  check(logits.dim(-1) == p.n_expert && static_cast<int64_t>(bias.size()) == p.n_expert &&
            sel.numel() == T * p.top_k && weight.numel() == T * p.top_k,
        "route: shapes");
  kRouterOp.on(ctx)(logits.f32(), bias.data(), p, T, sel.ptr<int32_t>(), weight.f32());
}

void moe_experts(Ctx& ctx, const Tensor& z, const Tensor& sel, const Tensor& weight,
                 std::span<const ExpertMats> experts, SituParams situ, const Tensor& c) {
  for (const Tensor* t : {&z, &weight, &c}) contiguous_f32(*t, "moe_experts", "z/weight/c");
  check(sel.dtype == DType::i32 && sel.is_contiguous(), "moe_experts: sel must be contiguous i32");
  check(!experts.empty(), "moe_experts: no experts");
  const int64_t T = z.dim(0), L = experts[0].gate.cols, k = sel.numel() / std::max<int64_t>(T, 1);
  check(z.numel() == T * L && c.numel() == T * L && sel.numel() == T * k &&
            weight.numel() == T * k && experts[0].down.rows == L,
        "moe_experts: z [", T, ", ", z.dim(-1), "], sel ", sel.numel(), ", c ", c.numel(),
        " for experts of width ", L);
  // bf16 precision (core/precision.h) lets the device carry the expert inputs as bf16 too.
  const bool bf16_act = active_precision() == Precision::bf16;
  kMoeExpertsOp.on(ctx)(z.f32(), sel.ptr<int32_t>(), weight.f32(), experts.data(),
                        {T, k, static_cast<int64_t>(experts.size()), situ, bf16_act}, c.f32());
}

void gather_choice_rows(Ctx& ctx, const Tensor& src, std::span<const int64_t> choice, int64_t k,
                        const Tensor& dst) {
  contiguous_f32(src, "gather_choice_rows", "src");
  contiguous_f32(dst, "gather_choice_rows", "dst");
  const int64_t width = src.dim(-1), n = static_cast<int64_t>(choice.size());
  check(dst.numel() == n * width, "gather_choice_rows: dst is not [", n, ", ", width, "]");
  kGatherChoiceRowsOp.on(ctx)(src.f32(), choice.data(), n, k, width, dst.f32());
}

void moe_scatter_add(Ctx& ctx, const Tensor& y, std::span<const int64_t> choice,
                     const Tensor& weight, int64_t k, const Tensor& c) {
  contiguous_f32(y, "moe_scatter_add", "y");
  contiguous_f32(c, "moe_scatter_add", "c");
  const int64_t width = c.dim(-1), n = static_cast<int64_t>(choice.size());
  check(y.numel() == n * width, "moe_scatter_add: y is not [", n, ", ", width, "]");
  kMoeScatterAddOp.on(ctx)(y.f32(), choice.data(), weight.f32(), n, k, width, c.f32());
}

}  // namespace k3::op
