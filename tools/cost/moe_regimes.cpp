#include "cost/moe_regimes.h"

#include "cost/memory.h"

namespace k3::cost {
namespace {

MoeRegime regime(const std::string& name, double w, double n, double k, const HParams& hp,
                 const Hardware& hw) {
  const double m = static_cast<double>(hp.moe.d_expert);
  const double wb = expert_bytes_per_param(hp), a = hw.act_bytes;
  const double ep = static_cast<double>(hw.ep_size);
  MoeRegime r;
  r.name = name;
  r.width = w;
  r.n_expert = n;
  r.n_used = k;
  r.total_params = 3 * n * w * m;
  r.active_params = 3 * k * w * m;
  r.flops = 2 * r.active_params;
  r.hbm_bytes = r.active_params * wb;
  r.net_bytes = 2 * k * w * a;
  r.intensity_one = 2 / wb;
  r.tokens_per_expert = hw.flop_per_s / hw.hbm_bytes_per_s * wb / 2;
  r.tokens_in_domain = r.tokens_per_expert * n / k;
  r.tokens_per_device = r.tokens_in_domain / ep;
  r.hbm_seconds = r.hbm_bytes / hw.hbm_bytes_per_s;
  r.compute_seconds = r.flops / (ep * hw.flop_per_s);
  r.comm_seconds = r.net_bytes / (ep * hw.net_bytes_per_s);
  r.comm_compute_ratio = r.comm_seconds / r.compute_seconds;
  return r;
}

}  // namespace

std::vector<MoeRegime> moe_regimes(const HParams& hp, const Hardware& hw) {
  const MoeHParams& m = hp.moe;
  if (m.n_expert == 0) return {};
  const double d = static_cast<double>(hp.d_model), l = static_cast<double>(m.d_latent);
  const double n = static_cast<double>(m.n_expert), k = static_cast<double>(m.n_used);
  const double alpha = d / l;
  return {regime("full", d, n / alpha, k / alpha, hp, hw), regime("eff", l, n, k / alpha, hp, hw),
          regime("acc", l, n, k, hp, hw)};
}

}  // namespace k3::cost
