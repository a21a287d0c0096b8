#include "train/optimizer_params.h"

#include "k3/error.h"

namespace k3::train {

std::vector<Param> optimizer_params(ParamSet& values, ParamSet& grads, const HParams& hp,
                                    bool per_head_muon) {
  std::vector<Param> out;
  for (const auto& [name, p] : values.all()) {
    auto g = grads.all().find(name);
    check(g != grads.all().end(), "optimizer: no gradient for ", name);
    check(g->second.shape == p.shape, "optimizer: the gradient of ", name, " has another shape");
    out.push_back(Param{name, p.shape, values[name], grads[name], {}});
  }
  assign_groups(out, hp, per_head_muon);
  return out;
}

}  // namespace k3::train
