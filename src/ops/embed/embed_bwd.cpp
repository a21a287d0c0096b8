// Backward of the embedding lookup: each row's gradient goes back to its token's table row.
#include "ops/embed/embed.h"

namespace k3 {

void embed_rows_bwd(const int64_t* ids, int64_t T, int64_t d, const float* dout, float* dtable) {
  for (int64_t t = 0; t < T; ++t) {
    float* row = dtable + ids[t] * d;
    for (int64_t j = 0; j < d; ++j) row[j] += dout[t * d + j];
  }
}

}  // namespace k3
