#include "ops/moe/moe_combine.h"

#include <algorithm>
#include <map>
#include <vector>

#include "backend/cuda/launchers.h"
#include "core/parallel.h"

namespace k3 {
namespace {

constexpr int64_t kParallelMin = int64_t{1} << 15;  // elements; below, one thread
constexpr int64_t kColBlock = 256;                  // columns per scatter work item

}  // namespace

void gather_rows(const float* src, const int64_t* rows, int64_t n, int64_t width, float* dst) {
  parallel_for(n, n * width > kParallelMin,
               [&](int64_t i) { std::copy_n(src + rows[i] * width, width, dst + i * width); });
}

void gather_choice_rows(const float* src, const int64_t* choice, int64_t n, int64_t k,
                        int64_t width, float* dst) {
  parallel_for(n, n * width > kParallelMin, [&](int64_t i) {
    std::copy_n(src + (choice[i] / k) * width, width, dst + i * width);
  });
}

void moe_scatter_add(const float* y, const int64_t* choice, const float* weight, int64_t n,
                     int64_t k, int64_t width, float* c) {
  // Several choices can land on one token row, so threads split the columns, not the
  // choices: every element still sums its terms in choice order.
  const int64_t n_blocks = (width + kColBlock - 1) / kColBlock;
  parallel_for(n_blocks, n * width > kParallelMin && n_blocks > 1, [&](int64_t b) {
    const int64_t j0 = b * kColBlock, j1 = std::min(width, j0 + kColBlock);
    for (int64_t i = 0; i < n; ++i) {
      const float wt = weight[choice[i]];
      float* cr = c + (choice[i] / k) * width;
      const float* yr = y + i * width;
      for (int64_t j = j0; j < j1; ++j) cr[j] += wt * yr[j];
    }
  });
}

void gather_rows_ref(const float* src, const int64_t* rows, int64_t n, int64_t width, float* dst) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < width; ++j) dst[i * width + j] = src[rows[i] * width + j];
}

void gather_choice_rows_ref(const float* src, const int64_t* choice, int64_t n, int64_t k,
                            int64_t width, float* dst) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < width; ++j) dst[i * width + j] = src[(choice[i] / k) * width + j];
}

void moe_scatter_add_ref(const float* y, const int64_t* choice, const float* weight, int64_t n,
                         int64_t k, int64_t width, float* c) {
  std::map<int64_t, std::vector<double>> sums;  // token row -> its running sum, in double
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = choice[i] / k;
    std::vector<double>& row =
        sums.try_emplace(t, c + t * width, c + (t + 1) * width).first->second;
    for (int64_t j = 0; j < width; ++j) row[j] += double(weight[choice[i]]) * y[i * width + j];
  }
  for (const auto& [t, row] : sums)
    for (int64_t j = 0; j < width; ++j) c[t * width + j] = static_cast<float>(row[j]);
}

const OpTable<GatherRowsFn, GatherRowsBwdFn> kGatherRowsOp =
    register_op<GatherRowsFn, GatherRowsBwdFn>({.name = "gather_rows",
                                                .ref = gather_rows_ref,
                                                .cpu = gather_rows,
                                                .cuda = K3_CUDA_IMPL(gather_rows_cuda),
                                                .bwd = gather_rows_bwd});
const OpTable<GatherChoiceRowsFn, GatherChoiceRowsBwdFn> kGatherChoiceRowsOp =
    register_op<GatherChoiceRowsFn, GatherChoiceRowsBwdFn>(
        {.name = "gather_choice_rows",
         .ref = gather_choice_rows_ref,
         .cpu = gather_choice_rows,
         .cuda = K3_CUDA_IMPL(gather_choice_rows_cuda),
         .bwd = gather_choice_rows_bwd});
const OpTable<MoeScatterAddFn, MoeScatterAddBwdFn> kMoeScatterAddOp =
    register_op<MoeScatterAddFn, MoeScatterAddBwdFn>({.name = "moe_scatter_add",
                                                      .ref = moe_scatter_add_ref,
                                                      .cpu = moe_scatter_add,
                                                      .cuda = K3_CUDA_IMPL(moe_scatter_add_cuda),
                                                      .bwd = moe_scatter_add_bwd});

}  // namespace k3
