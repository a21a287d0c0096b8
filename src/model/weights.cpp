#include "model/weights.h"

#include <algorithm>
#include <cstring>

#include "core/bf16.h"
#include "core/error.h"
#include "loader/tensor_table.h"

namespace k3 {
namespace {

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

// Binds names under one prefix.
struct Binder {
  const Checkpoint& ckpt;
  std::string prefix;
  Mat mat(const std::string& n) const { return as_mat(ckpt.tensor(prefix + n + ".weight")); }
  Vec vec(const std::string& n) const { return as_vec(ckpt.tensor(prefix + n)); }
  Vec weight(const std::string& n) const { return vec(n + ".weight"); }
  // An expert matrix, plain or MXFP4 (packed [rows, cols/2] + scales [rows, cols/32]).
  Mat expert(const std::string& n, ExpertFormat f) const {
    if (f == ExpertFormat::bf16) return mat(n);
    const TensorInfo& p = ckpt.tensor(prefix + n + ".weight_packed");
    const TensorInfo& s = ckpt.tensor(prefix + n + ".weight_scale");
    return Mat{p.shape[0], p.shape[1] * 2, MatFormat::mxfp4, p.data, s.data};
  }
  Vec folded_res(const std::string& n) const {  // AttnRes: norm ⊙ proj, fp32 (exact products)
    Vec w = weight(n + "_norm"), p = weight(n + "_proj");
    for (size_t i = 0; i < w.size(); ++i) w[i] *= p[i];
    return w;
  }
};

KdaWeights bind_kda(const Binder& b, const HParams& hp) {
  KdaWeights w;
  w.q = b.mat("q_proj");
  w.k = b.mat("k_proj");
  w.v = b.mat("v_proj");
  w.q_conv = b.weight("q_conv1d");
  w.k_conv = b.weight("k_conv1d");
  w.v_conv = b.weight("v_conv1d");
  w.f_a = b.mat("f_a_proj");
  w.f_b = b.mat("f_b_proj");
  w.A_log = b.vec("A_log");
  w.A_log.resize(static_cast<size_t>(hp.kda.n_head));  // padding entries are unused (spec §3.1)
  w.dt_bias = b.vec("dt_bias");
  w.b = b.mat("b_proj");
  w.g = b.mat("g_proj");
  w.o_norm = b.weight("o_norm");
  w.o = b.mat("o_proj");
  return w;
}

// W_UKᵀ per head [H*Dc, Dn] from kv_b [H*(Dn+Dv), Dc]: element copies, so exact in any dtype.
MlaAbsorbedWeights split_kv_b(const Mat& kv_b, const MlaHParams& m,
                              std::shared_ptr<const std::vector<uint8_t>>& storage) {
  check(kv_b.format != MatFormat::mxfp4, "kv_b_proj: MXFP4 is not supported");
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

MlaWeights bind_mla(const Binder& b, const HParams& hp) {
  MlaWeights w{b.mat("q_a_proj"),
               b.weight("q_a_layernorm"),
               b.mat("q_b_proj"),
               b.mat("kv_a_proj_with_mqa"),
               b.weight("kv_a_layernorm"),
               b.mat("kv_b_proj"),
               b.mat("g_proj"),
               b.mat("o_proj"),
               {},
               {}};
  w.absorbed = split_kv_b(w.kv_b, hp.mla, w.uk_t_storage);
  return w;
}

MoeWeights bind_moe(const Binder& b, const HParams& hp) {
  MoeWeights w;
  w.router = b.mat("gate");
  w.router_bias = b.vec("gate.e_score_correction_bias");
  w.latent_down = b.mat("routed_expert_down_proj");
  w.latent_norm = b.weight("routed_expert_norm");
  w.latent_up = b.mat("routed_expert_up_proj");
  if (hp.moe.n_shared > 0) {
    w.shared = {b.mat("shared_experts.gate_proj"), b.mat("shared_experts.up_proj"),
                b.mat("shared_experts.down_proj")};
  }
  const ExpertFormat f = hp.moe.expert_format;
  for (int64_t e = 0; e < hp.moe.n_expert; ++e) {
    const std::string ex = "experts." + std::to_string(e);
    w.experts.push_back(
        {b.expert(ex + ".w1", f), b.expert(ex + ".w3", f), b.expert(ex + ".w2", f)});
  }
  return w;
}

}  // namespace

ModelWeights bind_weights(const Checkpoint& ckpt) {
  const HParams& hp = ckpt.hparams();
  ModelWeights w;
  Binder top{ckpt, kModelPrefix};
  w.embed = top.mat("embed_tokens");
  w.norm = top.weight("norm");
  w.out_res = top.folded_res("output_attn_res");
  w.lm_head = as_mat(ckpt.tensor(kLmHead));
  for (int64_t l = 0; l < hp.n_layer; ++l) {
    Binder b{ckpt, layer_prefix(l)};
    LayerWeights lw;
    lw.attn_norm = b.weight("input_layernorm");
    lw.ffn_norm = b.weight("post_attention_layernorm");
    lw.attn_res = b.folded_res("self_attention_res");
    lw.mlp_res = b.folded_res("mlp_res");
    Binder attn{ckpt, b.prefix + "self_attn."};
    if (hp.attn_kind[l] == AttnKind::kda) {
      lw.kda = bind_kda(attn, hp);
    } else {
      lw.mla = bind_mla(attn, hp);
    }
    if (hp.is_moe_layer(l)) {
      lw.moe = bind_moe({ckpt, b.prefix + "block_sparse_moe."}, hp);
    } else {
      Binder mlp{ckpt, b.prefix + "mlp."};
      lw.dense = {mlp.mat("gate_proj"), mlp.mat("up_proj"), mlp.mat("down_proj")};
    }
    w.layers.push_back(std::move(lw));
  }
  return w;
}

}  // namespace k3
