// The cuda launchers of the registered ops (one per op, the op's launcher signature), for the
// ops' register_op lines: `.cuda = K3_CUDA_IMPL(linear_cuda)` is nullptr in a CPU-only build.
// Pointer conventions: cuda.h.
#pragma once

#include "ops/attn_res/attn_res.h"
#include "ops/conv1d/conv1d.h"
#include "ops/copy/copy.h"
#include "ops/elementwise/elementwise.h"
#include "ops/embed/embed.h"
#include "ops/fill/fill.h"
#include "ops/kda/kda.h"
#include "ops/kda/kda_gate.h"
#include "ops/linear/linear.h"
#include "ops/mla/mla.h"
#include "ops/moe/moe_combine.h"
#include "ops/moe/moe_experts.h"
#include "ops/moe/router.h"
#include "ops/norm/norm.h"
#include "ops/situ/situ.h"

#if defined(K3_HAVE_CUDA)
#define K3_CUDA_IMPL(f) (f)
#else
#define K3_CUDA_IMPL(f) nullptr
#endif

namespace k3 {

void linear_cuda(const float* x, int64_t T, const Mat& w, float* y);
void copy_cuda(const float* src, CopyShape s, float* dst);
void scatter_rows_cuda(const float* src, int64_t n, int64_t width, float* const* dst_rows);
void fill_cuda(float* y, int64_t n, float value);
void embed_cuda(const Mat& table, const int64_t* ids, int64_t T, float* out);
void gather_rows_cuda(const float* src, const int64_t* rows, int64_t n, int64_t width, float* dst);
void gather_choice_rows_cuda(const float* src, const int64_t* choice, int64_t n, int64_t k,
                             int64_t width, float* dst);
void moe_scatter_add_cuda(const float* y, const int64_t* choice, const float* weight, int64_t n,
                          int64_t k, int64_t width, float* c);
void rms_norm_cuda(const float* x, int64_t rows, int64_t n, const float* w, float eps, float* y);
void gated_rms_norm_cuda(const float* x, const float* z, int64_t rows, int64_t n, const float* w,
                         float eps, float* y);
void l2_norm_cuda(const float* x, int64_t rows, int64_t n, float eps, float* y);
void sigmoid_cuda(const float* x, int64_t n, float* y);
void scale_cuda(const float* x, int64_t n, float s, float* y);
void add_cuda(const float* a, const float* b, int64_t n, float* y);
void mul_sigmoid_cuda(const float* x, const float* gate, int64_t n, float* y);
void situ_glu_cuda(const float* gate, const float* up, int64_t n, SituParams p, float* out);
void conv1d_silu_cuda(const float* x, const float* w, float* state, Conv1dShape s, float* y);
void conv1d_silu_batch_cuda(const float* x, const float* w, const Conv1dSeq* seqs, int64_t n_seqs,
                            Conv1dShape s, float* y);
void kda_gate_cuda(const float* f, const float* A_log, const float* dt_bias, KdaGateShape s,
                   float* g);
void linear_multi_cuda(const float* x, int64_t T, const Mat* ws, float* const* ys, int64_t n);
void attn_res_mix_cuda(const float* const* cands, AttnResShape s, const float* w, float eps,
                       float* out);
void attn_res_norm_cuda(const float* const* cands, AttnResShape s, const float* w,
                        const float* w_norm, float eps, float* out);
void moe_experts_cuda(const float* z, const int32_t* sel, const float* weight,
                      const ExpertMats* experts, MoeExpertsShape s, float* c);
void router_cuda(const float* logits, const float* bias, RouterParams p, int64_t T, int32_t* sel,
                 float* weight);
void kda_recurrent_cuda(const KdaInputs& in, KdaShape s, float* S, float* o);
void kda_chunked_cuda(const KdaInputs& in, KdaShape s, float* S, float* o);
void kda_chunked_batch_cuda(const KdaInputs& all, const KdaBatchSeq* seqs, int64_t n, KdaShape s,
                            float* o);
void kda_decode_cuda(const KdaInputs& all, const KdaDecodeSeq* seqs, int64_t n, KdaShape s,
                     float* o);
void mla_expanded_cuda(const float* q, const float* k, const float* v, MlaShape s, float* o);
void mla_absorbed_cuda(const float* q, const PagedRows& cache, const MlaAbsorbedWeights& w,
                       MlaShape s, float* o);
// Split-KV over all sequences in one launch (mla_decode.cu). The op's launcher keeps fp32-grade
// scores and sums (bf16 hi+lo operand splits on the tensor cores); the _bf16 variant rounds
// the operands to bf16 once (a third of the matrix work, ~1e-3 relative error: benchmarks).
void mla_absorbed_batch_cuda(const float* q, const MlaBatchSeq* seqs, int64_t n_seqs,
                             const MlaAbsorbedWeights& w, MlaShape dims, float* o);
// One sequence, one block per (query, head): the fallback for latents wider than the tiles.
void mla_absorbed_simple_cuda(const float* q, const PagedRows& cache, const MlaAbsorbedWeights& w,
                              MlaShape s, float* o);
void mla_absorbed_batch_bf16_cuda(const float* q, const MlaBatchSeq* seqs, int64_t n_seqs,
                                  const MlaAbsorbedWeights& w, MlaShape dims, float* o);

}  // namespace k3
