// MoE serving regimes for a hardware preset ([A1] "The MoE systems picture", "Cost-model lens",
// "l-MoE_eff / l-MoE_acc"). Three designs with the same total routed parameters:
//
//   full   width d, N/alpha experts, k/alpha active   (the standard MoE baseline)
//   eff    width l, N experts,       k/alpha active   (bank the savings: alpha x cheaper per token)
//   acc    width l, N experts,       k active         (reinvest: the config itself; K3 is acc)
//
// with alpha = d/l, N = num_experts, k = num_experts_per_token of the config. For K3: full = 8 of
// 448 at 7168, eff = 8 of 896 at 3584, acc = 16 of 896 at 3584. Expert intermediate width m is
// the same in all three. Per token and per MoE layer, routed experts only (latent projections,
// router and shared experts excluded), SiTU-GLU experts = three w x m matrices:
//
//   FLOPs          6 K w m                  (2 FLOPs per MAC)
//   HBM bytes      3 K w m * wb             (each active expert's weights read once: batch 1)
//   network bytes  2 K w * a                (dispatch + combine of the routed activation)
//   intensity(t)   2 t / wb   FLOP/B        (t tokens per expert; weights only)
//   t_exp*         (F / B_hbm) * wb / 2     tokens per expert to reach the compute roofline
//   t*             t_exp* * N / K           tokens in the EP domain (t_exp = t K / N)
//   comm/compute   F a / (3 m B_net)        once compute-bound; t, K, d, N, E cancel
//
// wb = bytes per expert weight (2 for BF16, 17/32 for MXFP4), a = bytes per activation element,
// F = FLOP/s, B_hbm and B_net = bytes/s per device. [A1] writes the ratio F / (3 m B_net) with
// B_net in elements/s; ours equals it with B_net in bytes/s divided by a.
#pragma once

#include <string>
#include <vector>

#include "cost/hardware.h"
#include "k3/hparams.h"

namespace k3::cost {

struct MoeRegime {
  std::string name;                 // "full", "eff", "acc"
  double width = 0;                 // expert input/output width w
  double n_expert = 0, n_used = 0;  // N, K (doubles: N/alpha need not be integral for a variant)
  double total_params = 0;          // 3 N w m
  double active_params = 0;         // 3 K w m
  double flops = 0;                 // per token
  double hbm_bytes = 0;             // per token at batch 1
  double net_bytes = 0;             // per token
  double intensity_one = 0;         // FLOP/B at one token per expert
  double tokens_per_expert = 0;     // t_exp*
  double tokens_in_domain = 0;      // t*
  double tokens_per_device = 0;     // t* / E
  double hbm_seconds = 0;           // per token at batch 1, one device streaming the weights
  double compute_seconds = 0;       // per token, compute-bound, spread over the EP domain
  double comm_seconds = 0;          // per token, spread over the EP domain
  double comm_compute_ratio = 0;    // comm_seconds / compute_seconds
};

std::vector<MoeRegime> moe_regimes(const HParams& hp, const Hardware& hw);

}  // namespace k3::cost
