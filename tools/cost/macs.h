// Attention-core multiply-accumulate coefficients and cached scalars per position
// ([A1] "MLA", "attention head dimensions"; [A2] FIG 31-33; spec §4.2-4.3, §11.1).
//
// A MAC coefficient is the count of QK and weighted-V multiply-accumulates per (query, cached
// position) pair for one layer, all query heads together: H * (d_qk + d_v). Projections, softmax
// and the output expansion are excluded, as in the articles.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "k3/hparams.h"

namespace k3::cost {

// One cache organisation with H query heads. For K3 (H = 96, 128/128 content heads, latent 512,
// shared key 64):
//   MHA 128/128   96 KV heads of 128/128        cached 24,576   MAC 24,576
//   GQA8          8 KV heads of 128/128          cached  2,048   MAC 24,576
//   MQA 256/256   1 KV head, K 256 and V 256     cached    512   MAC 49,152
//   MLA (decode)  absorbed MQA-576/512           cached    576   MAC 104,448
//   shared K=V    one 512 vector used as K and V cached    512   MAC 98,304
// The MQA and shared K=V widths are the latent budget (kv_lora_rank) split into K and V, or used
// once for both: the comparison of [A1] "for a fixed KV-cache size C ...".
// GQA uses 8 KV groups when the head count allows it, else 1.
struct AttnVariant {
  std::string name;    // "MHA 128/128", "GQA8", "MQA 256/256", "MLA", "shared K=V"
  int64_t cached = 0;  // scalars cached per position per layer
  int64_t mac = 0;     // decode MACs per cached position per layer (all query heads)
  double mac_per_cached_byte(int64_t bytes_per_scalar) const {
    return static_cast<double>(mac) / static_cast<double>(cached * bytes_per_scalar);
  }
};

struct MacCoefficients {
  int64_t q_heads = 0;
  int64_t mla_prefill = 0;   // expanded MHA-192/128: H (dqk + dv) = 30,720
  int64_t mla_decode = 0;    // absorbed MQA-576/512: H ((dc + dr) + dc) = 104,448
  int64_t mha_baseline = 0;  // H (qk_nope + v_head) = 24,576 (the "128/128 MHA")
  double decode_vs_mha() const { return static_cast<double>(mla_decode) / mha_baseline; }
  double prefill_vs_mha() const { return static_cast<double>(mla_prefill) / mha_baseline; }
  std::vector<AttnVariant> variants;  // MHA, GQA8, MQA, MLA (decode form), shared K=V
};

MacCoefficients mac_coefficients(const HParams& hp);

}  // namespace k3::cost
