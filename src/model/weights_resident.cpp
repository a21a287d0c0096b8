#include "model/weights_resident.h"

#include "backend/cuda/cuda.h"

namespace k3 {
namespace {

using RangeFn = void (*)(const void* host, size_t bytes);
RangeFn g_each = nullptr;  // what upload() does with each range (make or release)

void upload(const Mat& m) {
  if (m.empty()) return;
  const size_t n = static_cast<size_t>(m.rows * m.cols);
  switch (m.format) {
    case MatFormat::bf16:
      g_each(m.data, n * 2);
      break;
    case MatFormat::f32:
      g_each(m.data, n * 4);
      break;
    case MatFormat::mxfp4:
      g_each(m.data, n / 2);
      g_each(m.scales, n / 32);
      break;
  }
}

void upload(const Vec& v) { g_each(v.data(), v.size() * sizeof(float)); }

void upload(const FfnWeights& f) {
  upload(f.gate);
  upload(f.up);
  upload(f.down);
}

void upload(const LayerWeights& l) {
  for (const Vec* v : {&l.attn_norm, &l.ffn_norm, &l.attn_res, &l.mlp_res}) upload(*v);
  const KdaWeights& k = l.kda;
  for (const Mat* m : {&k.q, &k.k, &k.v, &k.f_a, &k.f_b, &k.b, &k.g, &k.o}) upload(*m);
  for (const Vec* v : {&k.q_conv, &k.k_conv, &k.v_conv, &k.A_log, &k.dt_bias, &k.o_norm})
    upload(*v);
  const MlaWeights& a = l.mla;
  for (const Mat* m :
       {&a.q_a, &a.q_b, &a.kv_a, &a.kv_b, &a.g, &a.o, &a.absorbed.uk_t, &a.absorbed.kv_b})
    upload(*m);
  upload(a.q_a_norm);
  upload(a.kv_a_norm);
  upload(l.dense);
  const MoeWeights& e = l.moe;
  for (const Mat* m : {&e.router, &e.latent_down, &e.latent_up}) upload(*m);
  upload(e.router_bias);
  upload(e.latent_norm);
  upload(e.shared);
  for (const FfnWeights& f : e.experts) upload(f);
}

void each_range(const ModelWeights& w, RangeFn fn) {
  g_each = fn;
  upload(w.embed);
  upload(w.lm_head);
  upload(w.norm);
  upload(w.out_res);
  for (const LayerWeights& l : w.layers) upload(l);
}

}  // namespace

void make_weights_resident(const ModelWeights& w) { each_range(w, cuda_make_resident); }

void release_weights_resident(const ModelWeights& w) { each_range(w, cuda_release_resident); }

}  // namespace k3
