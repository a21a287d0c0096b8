// k3/weight_table.h: the loader's weight table, without its binding details.
#include "k3/weight_table.h"

#include "loader/tensor_table.h"

namespace k3 {

std::vector<WeightEntry> weight_table(const HParams& hp) {
  std::vector<TensorSpec> specs = expected_tensors(hp);
  std::vector<WeightEntry> out;
  out.reserve(specs.size());
  for (TensorSpec& s : specs) {
    const int64_t params = logical_params(s);
    out.push_back({std::move(s.name), std::move(s.shapes[0]), std::move(s.role), s.key.slot,
                   s.key.layer, s.key.expert, params});
  }
  return out;
}

}  // namespace k3
