// Backward of the strided copy: every destination element's gradient goes back to the source
// element it was copied from (summed, in order, where a stride-0 source was broadcast).
#include "ops/copy/copy.h"

namespace k3 {

void copy_strided_bwd(const float* ddst, CopyShape s, float* dsrc) {
  for (int64_t i0 = 0; i0 < s.shape[0]; ++i0)
    for (int64_t i1 = 0; i1 < s.shape[1]; ++i1)
      for (int64_t i2 = 0; i2 < s.shape[2]; ++i2)
        for (int64_t i3 = 0; i3 < s.shape[3]; ++i3) {
          const int64_t at[4] = {i0, i1, i2, i3};
          int64_t so = 0, d = 0;
          for (int k = 0; k < 4; ++k) {
            so += at[k] * s.src_stride[k];
            d += at[k] * s.dst_stride[k];
          }
          dsrc[so] += ddst[d];
        }
}

}  // namespace k3
