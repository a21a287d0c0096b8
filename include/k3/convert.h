// `k3 convert`: rewrite any loadable checkpoint (a `k3 train` output is F32 throughout) in the
// official dtypes — BF16 trunk, F32 where the layout says so, routed experts in BF16 or MXFP4 —
// so that a trained model ships at its published size.
#pragma once

#include <string>

#include "k3/init.h"  // InitOptions: mxfp4, shard_bytes, force

namespace k3 {

struct ConvertReport {
  uint64_t bytes = 0;           // tensor bytes written
  double max_rel_rounding = 0;  // max over tensors of ‖rounded − x‖ / ‖x‖
  std::string worst_tensor;     // where that maximum is
};

// Reads in_dir, writes out_dir (official layout, the tokenizer files copied). With opt.mxfp4
// each 32-value group of a routed expert row gets the OCP scale (max |x| / scale ≤ 6) and its
// values the nearest E2M1 code. Throws k3::Error naming what is wrong.
ConvertReport convert_checkpoint(const std::string& in_dir, const std::string& out_dir,
                                 const InitOptions& opt);

}  // namespace k3
