#include "model/weights.h"

#include <algorithm>
#include <cstring>

#include "core/bf16.h"
#include "core/error.h"
#include "loader/tensor_table.h"

namespace k3 {
namespace {

using S = WeightSlot;
using T = Transform;

Mat as_mat(const TensorInfo& t) {
  Mat m;
  m.rows = t.shape[0];
  m.cols = t.numel() / std::max<int64_t>(t.shape[0], 1);
  m.format = t.dtype == DType::bf16 ? MatFormat::bf16 : MatFormat::f32;
  m.data = t.data;
  return m;
}

Vec as_vec(const TensorInfo& t) {
  Vec v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (t.dtype == DType::bf16) {
      uint16_t b;
      std::memcpy(&b, t.data + 2 * i, 2);
      v[i] = bf16_to_f32(b);
    } else {
      std::memcpy(&v[i], t.data + 4 * i, 4);
    }
  }
  return v;
}

// AttnRes norm ⊙ proj in fp32: whichever of the pair comes first is stored, the second
// multiplies in (exact products, the same in either order).
void fold_into(Vec& dst, const Vec& v) {
  if (dst.empty()) {
    dst = v;
    return;
  }
  check(dst.size() == v.size(), "AttnRes norm and projection differ in size");
  for (size_t i = 0; i < v.size(); ++i) dst[i] *= v[i];
}

// W_UKᵀ per head [H*Dc, Dn] from kv_b [H*(Dn+Dv), Dc]: element copies, so exact in any dtype.
MlaAbsorbedWeights split_kv_b(const Mat& kv_b, const MlaHParams& m,
                              std::shared_ptr<const std::vector<uint8_t>>& storage) {
  check(kv_b.format != MatFormat::mxfp4, "MLA kv_b: MXFP4 is not supported");
  const int64_t H = m.n_head, Dn = m.qk_nope, Dv = m.v_head, Dc = m.kv_lora_rank;
  const size_t elem = kv_b.format == MatFormat::bf16 ? 2 : 4;
  auto out = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(H * Dc * Dn) * elem);
  const uint8_t* src = static_cast<const uint8_t*>(kv_b.data);
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t j = 0; j < Dn; ++j) {
      const uint8_t* row = src + ((h * (Dn + Dv) + j) * Dc) * elem;  // W_UK[h][j, :]
      for (int64_t c = 0; c < Dc; ++c)
        std::memcpy(out->data() + ((h * Dc + c) * Dn + j) * elem, row + c * elem, elem);
    }
  }
  storage = out;
  return {Mat{H * Dc, Dn, kv_b.format, out->data(), nullptr}, kv_b};
}

// Where a key's tensor lands in ModelWeights: a matrix or a vector field (or neither: the
// slot belongs to another component).
struct Dest {
  Mat* mat = nullptr;
  Vec* vec = nullptr;
  bool found() const { return mat || vec; }
};

Dest top_dest(ModelWeights& w, S s) {
  switch (s) {
    case S::embed:
      return {&w.embed};
    case S::lm_head:
      return {&w.lm_head};
    case S::final_norm:
      return {nullptr, &w.norm};
    case S::out_res_norm:
    case S::out_res_proj:
      return {nullptr, &w.out_res};
    default:
      return {};
  }
}

Dest glue_dest(LayerWeights& w, S s) {
  switch (s) {
    case S::attn_norm:
      return {nullptr, &w.attn_norm};
    case S::ffn_norm:
      return {nullptr, &w.ffn_norm};
    case S::attn_res_norm:
    case S::attn_res_proj:
      return {nullptr, &w.attn_res};
    case S::mlp_res_norm:
    case S::mlp_res_proj:
      return {nullptr, &w.mlp_res};
    default:
      return {};
  }
}

Dest kda_dest(KdaWeights& w, S s) {
  switch (s) {
    case S::kda_q:
      return {&w.q};
    case S::kda_k:
      return {&w.k};
    case S::kda_v:
      return {&w.v};
    case S::kda_q_conv:
      return {nullptr, &w.q_conv};
    case S::kda_k_conv:
      return {nullptr, &w.k_conv};
    case S::kda_v_conv:
      return {nullptr, &w.v_conv};
    case S::kda_f_a:
      return {&w.f_a};
    case S::kda_f_b:
      return {&w.f_b};
    case S::kda_a_log:
      return {nullptr, &w.A_log};
    case S::kda_dt_bias:
      return {nullptr, &w.dt_bias};
    case S::kda_b:
      return {&w.b};
    case S::kda_g:
      return {&w.g};
    case S::kda_o_norm:
      return {nullptr, &w.o_norm};
    case S::kda_o:
      return {&w.o};
    default:
      return {};
  }
}

Dest mla_dest(MlaWeights& w, S s) {
  switch (s) {
    case S::mla_q_a:
      return {&w.q_a};
    case S::mla_q_a_norm:
      return {nullptr, &w.q_a_norm};
    case S::mla_q_b:
      return {&w.q_b};
    case S::mla_kv_a:
      return {&w.kv_a};
    case S::mla_kv_a_norm:
      return {nullptr, &w.kv_a_norm};
    case S::mla_kv_b:
      return {&w.kv_b};
    case S::mla_g:
      return {&w.g};
    case S::mla_o:
      return {&w.o};
    default:
      return {};
  }
}

// A SiTU-GLU FFN's three matrices under the slots of one kind (dense, shared or expert).
Dest ffn_dest(FfnWeights& w, S s, S gate, S up, S down) {
  if (s == gate) return {&w.gate};
  if (s == up) return {&w.up};
  if (s == down) return {&w.down};
  return {};
}

Dest moe_dest(MoeWeights& w, const WeightKey& k) {
  if (k.expert >= 0) {
    return ffn_dest(w.experts[static_cast<size_t>(k.expert)], k.slot, S::expert_w1, S::expert_w3,
                    S::expert_w2);
  }
  switch (k.slot) {
    case S::moe_router:
      return {&w.router};
    case S::moe_router_bias:
      return {nullptr, &w.router_bias};
    case S::moe_latent_down:
      return {&w.latent_down};
    case S::moe_latent_norm:
      return {nullptr, &w.latent_norm};
    case S::moe_latent_up:
      return {&w.latent_up};
    default:
      return ffn_dest(w.shared, k.slot, S::moe_shared_gate, S::moe_shared_up, S::moe_shared_down);
  }
}

Dest dest_of(ModelWeights& w, const WeightKey& k) {
  if (k.layer < 0) return top_dest(w, k.slot);
  LayerWeights& lw = w.layers[static_cast<size_t>(k.layer)];
  for (Dest d : {glue_dest(lw, k.slot), kda_dest(lw.kda, k.slot), mla_dest(lw.mla, k.slot),
                 ffn_dest(lw.dense, k.slot, S::dense_gate, S::dense_up, S::dense_down),
                 moe_dest(lw.moe, k)}) {
    if (d.found()) return d;
  }
  return {};
}

// Binds one tensor into its field, applying the spec's load-time transform.
void bind_one(const TensorSpec& spec, const TensorInfo& t, const HParams& hp, ModelWeights& w) {
  const Dest d = dest_of(w, spec.key);
  const bool is_vec = spec.placement == Placement::host_f32;
  check(is_vec ? d.vec != nullptr : d.mat != nullptr, spec.name, ": no field to bind it to");
  switch (spec.transform) {
    case T::none:
      *d.mat = as_mat(t);
      return;
    case T::widen_f32:
    case T::conv_taps_flatten:
      *d.vec = as_vec(t);
      return;
    case T::a_log_slice:  // padding entries are unused (spec §3.1)
      *d.vec = as_vec(t);
      d.vec->resize(static_cast<size_t>(hp.kda.n_head));
      return;
    case T::attn_res_fold:
      fold_into(*d.vec, as_vec(t));
      return;
    case T::kv_b_split: {
      MlaWeights& m = w.layers[static_cast<size_t>(spec.key.layer)].mla;
      m.kv_b = as_mat(t);
      m.absorbed = split_kv_b(m.kv_b, hp.mla, m.uk_t_storage);
      return;
    }
    case T::mxfp4_packed:  // [rows, cols/2] nibbles; the scales arrive as their own spec
      *d.mat = Mat{t.shape[0], t.shape[1] * 2, MatFormat::mxfp4, t.data, d.mat->scales};
      return;
    case T::mxfp4_scales:
      d.mat->scales = t.data;
      return;
  }
}

}  // namespace

ModelWeights bind_weights(const Checkpoint& ckpt) {
  const HParams& hp = ckpt.hparams();
  ModelWeights w;
  w.layers.resize(static_cast<size_t>(hp.n_layer));
  for (int64_t l = 0; l < hp.n_layer; ++l) {
    if (hp.is_moe_layer(l)) w.layers[l].moe.experts.resize(static_cast<size_t>(hp.moe.n_expert));
  }
  for (const TensorSpec& spec : expected_tensors(hp)) {
    if (spec.key.layer >= hp.n_layer) continue;  // the MTP head: training only
    bind_one(spec, ckpt.tensor(spec.name), hp, w);
  }
  return w;
}

}  // namespace k3
