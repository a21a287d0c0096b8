// The whole-model training pass on the device over a batch of windows (train/cuda/gpu_batch.h):
// embedding, the layers with their AttnRes residual stream, the final mix and norm, the LM
// head and the cross-entropy, and the backward over all of it — the structure of
// train/model_train.cpp with device buffers and B windows at once.
#include "core/error.h"
#include "train/cuda/gpu_batch.h"

#if defined(K3_HAVE_CUDA)
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "loader/tensor_table.h"
#include "train/cuda/gpu_layers.h"
#include "train/cuda/gpu_profile.h"

namespace k3::train {
namespace {

using gpu::DevArray;
using gpu::DevBuf;
using gpu::GWeight;
using gpu::Rows;
using gpu::Scope;

// The AttnRes residual stream: every value the prefix sum P takes, and the sealed slots, are
// nodes with gradients (model_train.cpp's Stream, on the device).
struct Stream {
  std::vector<DevBuf> val, grad;
  int add(DevBuf v) {
    grad.emplace_back(v.size());
    val.push_back(std::move(v));
    return static_cast<int>(val.size()) - 1;
  }
};

struct Mix {
  std::vector<int> cands;
  std::string norm, proj;  // parameter names (w = norm ⊙ proj)
};

DevBuf mix_weight(const GWeight& norm, const GWeight& proj, int64_t d) {
  DevBuf w(d, false);
  gpu::mul_fwd(norm.w, proj.w, d, w.data());
  return w;
}

DevBuf mix_fwd(const Stream& st, const Mix& m, const Scope& s, float eps, int64_t N, int64_t d) {
  const DevBuf w = mix_weight(s(m.norm), s(m.proj), d);
  DevBuf out(N * d, false);
  std::vector<const float*> c;
  for (int id : m.cands) c.push_back(st.val[size_t(id)].data());
  gpu::attn_res_mix_fwd(c.data(), static_cast<int64_t>(c.size()), N, d, w.data(), eps, out.data());
  return out;
}

void mix_back(Stream& st, const Mix& m, const Scope& s, float eps, int64_t N, int64_t d,
              const DevBuf& dout) {
  const GWeight norm = s(m.norm), proj = s(m.proj);
  const DevBuf w = mix_weight(norm, proj, d);
  DevBuf dw(d);
  std::vector<const float*> c;
  std::vector<float*> dc;
  for (int id : m.cands) {
    c.push_back(st.val[size_t(id)].data());
    dc.push_back(st.grad[size_t(id)].data());
  }
  gpu::attn_res_mix_bwd(c.data(), static_cast<int64_t>(c.size()), N, d, w.data(), eps, dout.data(),
                        dc.data(), dw.data());
  gpu::mul_bwd(norm.w, proj.w, d, dw.data(), norm.g, proj.g);
}

struct LayerTape {
  Mix attn_mix;       // empty cands: a = P (layer 0)
  int a_from = -1;    // the node copied into a when there is no mix
  int p_before = -1;  // P before the attention add (-1: P restarts as A after a seal)
  int p_attn = -1;    // P after the attention add
  int p_ffn = -1;     // P after the FFN add
  Mix mlp_mix;
  DevBuf a, x, mm, xf;  // mixes, normalised inputs
  std::unique_ptr<gpu::KdaTape> kda;
  std::unique_ptr<gpu::MlaTape> mla;
  std::unique_ptr<gpu::MoeTape> moe;
  std::unique_ptr<gpu::GluTape> dense;
};

std::vector<int> with_p(const std::vector<int>& sealed, int p) {
  std::vector<int> c = sealed;
  if (p >= 0) c.push_back(p);
  return c;
}

const gpu::GluNames kDense{"gate_proj.weight", "up_proj.weight", "down_proj.weight"};

DevBuf copy_of(const DevBuf& v) {
  DevBuf c(v.size(), false);
  gpu::dev_copy(c.data(), v.data(), v.bytes());
  return c;
}

void layer_fwd(const HParams& hp, const Scope& ls, int64_t l, Rows r, Stream& st,
               std::vector<int>& sealed, int& P, LayerTape& t) {
  const int64_t d = hp.d_model, N = r.N();
  const float eps = hp.rms_eps;
  if (sealed.empty()) {
    t.a_from = P;
    t.a = copy_of(st.val[size_t(P)]);
  } else {
    t.attn_mix = {with_p(sealed, P), "self_attention_res_norm.weight",
                  "self_attention_res_proj.weight"};
    t.a = mix_fwd(st, t.attn_mix, ls, eps, N, d);
  }
  if (hp.seals_slot(l)) {
    sealed.push_back(P);
    P = -1;
  }
  t.x = gpu::rms(t.a, d, ls("input_layernorm.weight"), eps);
  const Scope attn = ls.sub("self_attn.");
  DevBuf A;
  if (hp.attn_kind[size_t(l)] == AttnKind::kda) {
    K3_PROFILE_PHASE("forward: KDA");
    t.kda = std::make_unique<gpu::KdaTape>();
    gpu::kda_fwd(attn, hp, t.x, r, *t.kda, A);
  } else {
    K3_PROFILE_PHASE("forward: MLA");
    t.mla = std::make_unique<gpu::MlaTape>();
    gpu::mla_fwd(attn, hp, t.x, r, *t.mla, A);
  }
  t.p_before = P;
  if (P >= 0) gpu::add_fwd(st.val[size_t(P)].data(), A.data(), N * d, A.data());
  P = t.p_attn = st.add(std::move(A));
  t.mlp_mix = {with_p(sealed, P), "mlp_res_norm.weight", "mlp_res_proj.weight"};
  t.mm = mix_fwd(st, t.mlp_mix, ls, eps, N, d);
  t.xf = gpu::rms(t.mm, d, ls("post_attention_layernorm.weight"), eps);
  DevBuf F;
  if (hp.is_moe_layer(l)) {
    K3_PROFILE_PHASE("forward: MoE");
    t.moe = std::make_unique<gpu::MoeTape>();
    gpu::moe_fwd(ls.sub("block_sparse_moe."), hp, t.xf, r, *t.moe, F);
  } else {
    K3_PROFILE_PHASE("forward: dense FFN");
    t.dense = std::make_unique<gpu::GluTape>();
    gpu::glu_fwd(ls.sub("mlp."), kDense, hp, t.xf, N, *t.dense, F);
  }
  gpu::add_fwd(st.val[size_t(P)].data(), F.data(), N * d, F.data());
  P = t.p_ffn = st.add(std::move(F));
}

void layer_back(const HParams& hp, const Scope& ls, Rows r, Stream& st, const LayerTape& t) {
  const int64_t d = hp.d_model, N = r.N();
  const float eps = hp.rms_eps;
  const DevBuf& dF = st.grad[size_t(t.p_ffn)];  // P_ffn = P_attn + F
  gpu::add_scaled(dF.data(), N * d, 1.0f, st.grad[size_t(t.p_attn)].data());
  DevBuf dxf(N * d), dmm(N * d);
  if (t.moe) {
    K3_PROFILE_PHASE("backward: MoE");
    gpu::moe_back(ls.sub("block_sparse_moe."), hp, t.xf, r, *t.moe, dF, dxf);
  } else {
    K3_PROFILE_PHASE("backward: dense FFN");
    gpu::glu_back(ls.sub("mlp."), kDense, hp, t.xf, N, *t.dense, dF, dxf);
  }
  gpu::rms_back(t.mm, d, ls("post_attention_layernorm.weight"), eps, dxf, dmm);
  mix_back(st, t.mlp_mix, ls, eps, N, d, dmm);

  const DevBuf& dA = st.grad[size_t(t.p_attn)];  // P_attn = P_before + A (or A alone)
  if (t.p_before >= 0) {
    gpu::add_scaled(dA.data(), N * d, 1.0f, st.grad[size_t(t.p_before)].data());
  }
  DevBuf dx(N * d), da(N * d);
  const Scope attn = ls.sub("self_attn.");
  if (t.kda) {
    K3_PROFILE_PHASE("backward: KDA");
    gpu::kda_back(attn, hp, t.x, r, *t.kda, dA, dx);
  } else {
    K3_PROFILE_PHASE("backward: MLA");
    gpu::mla_back(attn, hp, t.x, r, *t.mla, dA, dx);
  }
  gpu::rms_back(t.a, d, ls("input_layernorm.weight"), eps, dx, da);
  if (t.attn_mix.cands.empty()) {
    gpu::add_scaled(da.data(), N * d, 1.0f, st.grad[size_t(t.a_from)].data());
  } else {
    mix_back(st, t.attn_mix, ls, eps, N, d, da);
  }
}

}  // namespace

struct GpuBatch::State {
  HParams hp;
  int64_t pass_windows;
  gpu::GpuParams params;
  State(const HParams& h, const ParamSet& like, int64_t pw)
      : hp(h), pass_windows(pw), params(like) {}

  // One pass over B windows of T tokens (ids and targets [B·T] on the host): adds the
  // gradients into params' device gradients (unless loss_only); returns the per-row losses.
  std::vector<float> pass(const int64_t* ids, const int64_t* targets, Rows r,
                          std::vector<std::vector<float>>* logits_out, bool loss_only);
};

std::vector<float> GpuBatch::State::pass(const int64_t* ids, const int64_t* targets, Rows r,
                                         std::vector<std::vector<float>>* logits_out,
                                         bool loss_only) {
  const int64_t d = hp.d_model, V = hp.vocab, N = r.N();
  const Scope model{params, kModelPrefix};
  std::optional<gpu::PassProfile::Timer> phase;  // the phases below, one at a time
  auto timed = [&phase](const char* name) {
    phase.reset();
    phase.emplace(gpu::PassProfile::instance(), name);
  };
  timed("forward: ids, embedding");
  DevArray<int64_t> tok(N, false), tgt(N, false);
  gpu::to_dev(tok.data(), ids, tok.bytes());
  gpu::to_dev(tgt.data(), targets, tgt.bytes());
  Stream st;
  DevBuf h(N * d, false);
  gpu::embed_fwd(model("embed_tokens.weight").w, tok.data(), N, d, h.data());
  int P = st.add(std::move(h));
  phase.reset();
  std::vector<int> sealed;
  std::vector<LayerTape> tapes(static_cast<size_t>(hp.n_layer));
  for (int64_t l = 0; l < hp.n_layer; ++l) {
    layer_fwd(hp, model.sub("layers." + std::to_string(l) + "."), l, r, st, sealed, P,
              tapes[size_t(l)]);
  }
  if (logits_out != nullptr) {
    timed("router logits to the host");
    for (int64_t l = 0; l < hp.n_layer; ++l) {
      const LayerTape& t = tapes[size_t(l)];
      if (!t.moe) continue;
      logits_out->emplace_back(static_cast<size_t>(t.moe->logits.size()));
      gpu::to_host(logits_out->back().data(), t.moe->logits.data(), t.moe->logits.bytes());
    }
  }
  timed("forward: output mix, LM head, loss");
  const Mix out_mix{with_p(sealed, P), "output_attn_res_norm.weight",
                    "output_attn_res_proj.weight"};
  const DevBuf xo = mix_fwd(st, out_mix, model, hp.rms_eps, N, d);
  const DevBuf xn = gpu::rms(xo, d, model("norm.weight"), hp.rms_eps);
  const Scope top{params, ""};
  const GWeight lm_head = top(kLmHead);
  const DevBuf logits = gpu::lin(xn, N, lm_head);  // [N, V]
  DevBuf loss(N, false);
  gpu::cross_entropy_fwd(logits.data(), tgt.data(), N, V, loss.data());
  std::vector<float> host_loss(static_cast<size_t>(N));
  gpu::to_host(host_loss.data(), loss.data(), loss.bytes());
  if (loss_only) return host_loss;

  timed("backward: loss, LM head, output mix");
  DevBuf dloss(N, false), dlogits(N * V), dxn(N * d), dxo(N * d);
  const std::vector<float> per_row(static_cast<size_t>(N), static_cast<float>(1.0 / double(r.T)));
  gpu::to_dev(dloss.data(), per_row.data(), dloss.bytes());  // each window's loss is a mean
  gpu::cross_entropy_bwd(logits.data(), tgt.data(), N, V, dloss.data(), dlogits.data());
  gpu::lin_back(xn, N, lm_head, dlogits, &dxn);
  gpu::rms_back(xo, d, model("norm.weight"), hp.rms_eps, dxn, dxo);
  mix_back(st, out_mix, model, hp.rms_eps, N, d, dxo);
  phase.reset();
  for (int64_t l = hp.n_layer - 1; l >= 0; --l) {
    layer_back(hp, model.sub("layers." + std::to_string(l) + "."), r, st, tapes[size_t(l)]);
  }
  timed("backward: embedding");
  gpu::embed_bwd(tok.data(), N, d, V, st.grad[0].data(), model("embed_tokens.weight").g);
  return host_loss;
}

bool gpu_training_available() { return gpu::available(); }

GpuBatch::GpuBatch(const HParams& hp, const ParamSet& like, int64_t pass_windows) {
  check(gpu::available(), "training on the GPU: no CUDA device is available");
  check(hp.n_mtp == 0,
        "training on the GPU: the multi-token prediction head (num_nextn_predict_layers) is "
        "not on the device yet; train it with --device cpu");
  check(pass_windows >= 1, "training on the GPU: a pass needs at least one window");
  s_ = std::make_unique<State>(hp, like, pass_windows);
}

GpuBatch::~GpuBatch() {
  gpu::PassProfile& profile = gpu::PassProfile::instance();
  if (profile.enabled()) std::fputs(profile.report().c_str(), stderr);
}

double GpuBatch::run(const ParamSet& params, const std::vector<Window>& windows, ParamSet& grads,
                     const RouterObserver& observe, const TrainOptions& opt) {
  if (windows.empty()) return 0;
  const int64_t T = static_cast<int64_t>(windows[0].tokens.size());
  check(T > 0, "training: a sequence needs at least one token");
  const HParams& hp = s_->hp;
  for (const Window& w : windows) {
    check(static_cast<int64_t>(w.tokens.size()) == T && w.targets.size() == w.tokens.size(),
          "training on the GPU: every window of a step must have the same length");
    for (int64_t t = 0; t < T; ++t) {
      check(w.tokens[size_t(t)] >= 0 && w.tokens[size_t(t)] < hp.vocab &&
                w.targets[size_t(t)] >= 0 && w.targets[size_t(t)] < hp.vocab,
            "training: token or target at position ", t, " is outside the vocabulary [0, ",
            hp.vocab, ")");
    }
  }
  const auto started = std::chrono::steady_clock::now();
  std::optional<gpu::PassProfile::Timer> phase(std::in_place, gpu::PassProfile::instance(),
                                               "parameters to the device");
  s_->params.upload(params);
  if (!opt.loss_only) s_->params.zero_grads();
  phase.reset();
  const int64_t n = static_cast<int64_t>(windows.size()), E = hp.moe.n_expert;
  double total = 0;
  for (int64_t w0 = 0; w0 < n; w0 += s_->pass_windows) {
    const Rows r{std::min(s_->pass_windows, n - w0), T};
    std::vector<int64_t> ids, tgt;
    for (int64_t b = 0; b < r.B; ++b) {
      const Window& w = windows[size_t(w0 + b)];
      ids.insert(ids.end(), w.tokens.begin(), w.tokens.end());
      tgt.insert(tgt.end(), w.targets.begin(), w.targets.end());
    }
    std::vector<std::vector<float>> logits;
    const std::vector<float> loss =
        s_->pass(ids.data(), tgt.data(), r, observe ? &logits : nullptr, opt.loss_only);
    for (int64_t b = 0; b < r.B; ++b) {  // window order, as the CPU batch hands them over
      double sum = 0;
      for (int64_t t = 0; t < T; ++t) sum += loss[size_t(b * T + t)];
      total += sum / double(T);
      if (!observe) continue;
      int64_t m = 0;
      for (int64_t l = 0; l < hp.n_layer; ++l) {
        if (!hp.is_moe_layer(l)) continue;
        observe(l, logits[size_t(m++)].data() + b * T * E, T);
      }
    }
  }
  if (!opt.loss_only) {
    phase.emplace(gpu::PassProfile::instance(), "gradients to the host");
    s_->params.add_grads_into(grads);
    phase.reset();
  }
  gpu::PassProfile::instance().add_run(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  return total;
}

}  // namespace k3::train

#else   // no CUDA backend in this build

namespace k3::train {

struct GpuBatch::State {};
bool gpu_training_available() { return false; }
GpuBatch::GpuBatch(const HParams&, const ParamSet&, int64_t) {
  throw Error("training on the GPU: this build has no CUDA backend (configure with nvcc)");
}
GpuBatch::~GpuBatch() = default;
double GpuBatch::run(const ParamSet&, const std::vector<Window>&, ParamSet&, const RouterObserver&,
                     const TrainOptions&) {
  return 0;
}

}  // namespace k3::train
#endif  // K3_HAVE_CUDA
