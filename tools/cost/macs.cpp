#include "cost/macs.h"

#include "k3/error.h"

namespace k3::cost {

MacCoefficients mac_coefficients(const HParams& hp) {
  const MlaHParams& a = hp.mla;
  const int64_t h = a.n_head, dk = a.qk_nope, dv = a.v_head, dc = a.kv_lora_rank;
  MacCoefficients m;
  m.q_heads = h;
  m.mla_prefill = h * (a.qk_head() + dv);
  m.mla_decode = h * (a.cache_width() + dc);
  m.mha_baseline = h * (dk + dv);
  const int64_t groups = h % 8 == 0 ? 8 : 1;
  const int64_t half = dc / 2;
  m.variants = {
      {cat("MHA ", dk, "/", dv), h * (dk + dv), h * (dk + dv)},
      {cat("GQA", groups), groups * (dk + dv), h * (dk + dv)},
      {cat("MQA ", half, "/", dc - half), dc, h * dc},
      {"MLA", a.cache_width(), m.mla_decode},
      {"shared K=V", dc, h * 2 * dc},
  };
  return m;
}

}  // namespace k3::cost
