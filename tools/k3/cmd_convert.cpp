// k3 convert: rewrite a checkpoint in the official dtypes (BF16 trunk, MXFP4 experts with
// --mxfp4), e.g. to ship a `k3 train` output (F32 throughout) at its published size.
#include <cstdio>

#include "args.h"
#include "commands.h"
#include "common_options.h"
#include "k3/convert.h"
#include "k3/error.h"

namespace k3::cli {

int cmd_convert(int argc, char** argv) {
  Args args(
      "convert", "-m DIR -o DIR [--mxfp4]",
      "Rewrite a checkpoint in the official K3 dtypes: BF16 trunk (F32 where the layout\n"
      "says so), routed experts in BF16 or, with --mxfp4, MXFP4 (each group of 32 values\n"
      "scaled so that max |x| / scale <= 6, values rounded to the nearest E2M1 code).\n"
      "The tokenizer files are copied. Use it to ship a `k3 train` output, which is F32.\n"
      "Prints the largest relative rounding error, ||rounded - x|| / ||x||, and its tensor.",
      {{"model", "m", "DIR", "input checkpoint", ""},
       {"output", "o", "DIR", "output directory (created; must be empty)", ""},
       {"mxfp4", "", "", "store routed experts as MXFP4 (compressed-tensors)", ""},
       {"shard-gb", "", "GB", "maximum shard size", "4"},
       {"force", "", "", "write even when DIR is not empty or the disk looks too small", ""}});
  if (!args.parse(argc, argv)) return 0;
  check(args.given("model"), "-m DIR (the checkpoint to convert) is required");
  check(args.given("output"), "-o DIR (where the converted checkpoint goes) is required");
  InitOptions opt;
  opt.mxfp4 = args.has("mxfp4");
  const double gb = args.number("shard-gb");
  check(gb > 0, "--shard-gb must be positive");
  opt.shard_bytes = static_cast<uint64_t>(gb * 1e9);
  opt.force = args.has("force");
  const std::string out = args.str("output");
  const ConvertReport r = convert_checkpoint(args.str("model"), out, opt);
  std::fprintf(stderr,
               "k3 convert: wrote %s (%.2f MB of tensors; largest rounding error %.3g in %s)\n",
               out.c_str(), r.bytes / 1e6, r.max_rel_rounding,
               r.worst_tensor.empty() ? "-" : r.worst_tensor.c_str());
  return 0;
}

}  // namespace k3::cli
