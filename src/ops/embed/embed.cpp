#include "ops/embed/embed.h"

#include "backend/cuda/launchers.h"

namespace k3 {

void embed_rows(const Mat& table, const int64_t* ids, int64_t T, float* out) {
  for (int64_t t = 0; t < T; ++t) mat_row(table, ids[t], out + t * table.cols);
}

const OpTable<EmbedFn> kEmbedOp =
    register_op<EmbedFn>({.name = "embed", .ref = embed_rows, .cuda = K3_CUDA_IMPL(embed_cuda)});

}  // namespace k3
