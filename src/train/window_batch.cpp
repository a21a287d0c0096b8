#include "train/window_batch.h"

#include <algorithm>
#include <string>
#include <utility>

#include "core/parallel.h"
#include "k3/model.h"

namespace k3::train {
namespace {

void zero_all(ParamSet& ps) {
  for (const auto& [name, p] : ps.all()) std::fill_n(ps[name], p.value.size(), 0.0f);
}

constexpr int64_t kAddChunk = int64_t{1} << 15;  // elements per task of the buffer sum

}  // namespace

double WindowBatch::run(const HParams& hp, const ParamSet& params,
                        const std::vector<Window>& windows, ParamSet& grads,
                        const RouterObserver& observe, TrainOptions opt) {
  const int64_t n = static_cast<int64_t>(windows.size());
  const int64_t per_round = std::max<int64_t>(1, std::min<int64_t>(num_threads(), n));
  if (static_cast<int64_t>(slots_.size()) < per_round) slots_.resize(size_t(per_round));
  const int64_t E = hp.moe.n_expert;
  double loss = 0;
  for (int64_t r0 = 0; r0 < n; r0 += per_round) {
    const int64_t m = std::min(per_round, n - r0);
    parallel_for(m, true, [&](int64_t j) {
      Slot& s = slots_[static_cast<size_t>(j)];
      const bool first = r0 + j == 0;  // window 0 adds straight into grads (zeroed)
      if (!first) {
        if (s.grads.all().empty()) s.grads = params.zeros_like();
        zero_all(s.grads);
      }
      s.logits.clear();
      TrainOptions o = opt;
      o.router_logits = nullptr;
      if (observe) {
        o.router_logits = [&s, E](int64_t layer, const float* logits, int64_t T) {
          s.logits.push_back({layer, T, std::vector<float>(logits, logits + T * E)});
        };
      }
      const Window& w = windows[static_cast<size_t>(r0 + j)];
      s.loss = loss_and_grads(hp, params, w.tokens.data(), w.targets.data(),
                              static_cast<int64_t>(w.tokens.size()), first ? grads : s.grads, o);
    });
    for (int64_t j = 0; j < m; ++j) {  // window order
      const Slot& s = slots_[static_cast<size_t>(j)];
      loss += s.loss;
      for (const RouterLogits& r : s.logits) observe(r.layer, r.logits.data(), r.T);
    }
    add_into(grads, r0 == 0 ? 1 : 0, m);
  }
  return loss;
}

void WindowBatch::add_into(ParamSet& grads, int64_t j0, int64_t j1) {
  if (j0 >= j1) return;
  struct Piece {
    std::string name;
    int64_t begin, end;
  };
  std::vector<Piece> pieces;
  for (const auto& [name, p] : grads.all()) {
    const int64_t size = static_cast<int64_t>(p.value.size());
    for (int64_t b = 0; b < size; b += kAddChunk)
      pieces.push_back({name, b, std::min(size, b + kAddChunk)});
  }
  parallel_for(static_cast<int64_t>(pieces.size()), true, [&](int64_t i) {
    const Piece& pc = pieces[static_cast<size_t>(i)];
    float* dst = grads[pc.name];
    for (int64_t j = j0; j < j1; ++j) {
      const float* src = std::as_const(slots_[static_cast<size_t>(j)].grads)[pc.name];
      for (int64_t e = pc.begin; e < pc.end; ++e) dst[e] += src[e];
    }
  });
}

}  // namespace k3::train
