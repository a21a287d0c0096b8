// The public entry points behind `k3 init` and `k3 inspect` (k3/init.h, k3/inspect.h), called as
// a library user would, and checked against the internals they summarise.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "k3/error.h"
#include "k3/init.h"
#include "k3/inspect.h"
#include "loader/checkpoint.h"

namespace {
namespace fs = std::filesystem;

const std::string kModels = K3_SOURCE_DIR "/tests/data/models/";

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const k3::Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(PublicApi, DescribeCheckpointListsEveryTensor) {
  const std::string dir = kModels + "c2_13layer";
  const k3::CheckpointSummary s = k3::describe_checkpoint(dir);
  const k3::Checkpoint ckpt(dir);
  EXPECT_EQ(s.dir, dir);
  EXPECT_EQ(s.hparams.n_layer, ckpt.hparams().n_layer);
  EXPECT_EQ(s.n_files, ckpt.n_files());
  ASSERT_EQ(s.tensors.size(), ckpt.tensors().size());
  size_t bytes = 0, n_mxfp4 = 0;
  std::set<std::string> roles;
  for (const k3::TensorSummary& t : s.tensors) {
    const k3::TensorInfo& info = ckpt.tensor(t.name);
    EXPECT_EQ(t.shape, info.shape) << t.name;
    EXPECT_EQ(t.dtype, k3::dtype_name(info.dtype)) << t.name;
    EXPECT_EQ(t.bytes, info.nbytes) << t.name;
    EXPECT_FALSE(t.role.empty()) << t.name;
    roles.insert(t.role);
    bytes += t.bytes;
    if (t.mxfp4) {
      ++n_mxfp4;
      EXPECT_EQ(t.dtype, "U8") << t.name;
      EXPECT_EQ(t.params, t.name.ends_with(".weight_scale") ? 0 : 2 * info.numel()) << t.name;
    } else {
      EXPECT_EQ(t.params, info.numel()) << t.name;
    }
  }
  EXPECT_EQ(s.tensor_bytes, bytes);
  EXPECT_EQ(bytes, ckpt.mapped_bytes());
  EXPECT_GT(n_mxfp4, 0u);  // c2_13layer stores its routed experts as MXFP4
  for (const char* r : {"embedding", "lm head", "kda attention", "mla attention"}) {
    EXPECT_TRUE(roles.count(r)) << r;
  }
}

TEST(PublicApi, DescribeCheckpointReportsABadDirectory) {
  EXPECT_NE(error_of([] { k3::describe_checkpoint(kModels + "no_such_model"); }).find("no_such"),
            std::string::npos);
}

TEST(PublicApi, InitCheckpointFromFileWritesWhatDescribeReads) {
  const fs::path out = fs::temp_directory_path() / ("k3_api_init_" + std::to_string(getpid()));
  fs::remove_all(out);
  k3::init_checkpoint_from_file(kModels + "c1_tiny/config.json", out.string(), {.seed = 5});
  const k3::CheckpointSummary made = k3::describe_checkpoint(out.string());
  const k3::CheckpointSummary ref = k3::describe_checkpoint(kModels + "c1_tiny");
  ASSERT_EQ(made.tensors.size(), ref.tensors.size());
  for (size_t i = 0; i < made.tensors.size(); ++i) {
    EXPECT_EQ(made.tensors[i].name, ref.tensors[i].name);
    EXPECT_EQ(made.tensors[i].shape, ref.tensors[i].shape);
  }
  fs::remove_all(out);
}

TEST(PublicApi, InitCheckpointFromFileNamesABadConfig) {
  const fs::path out = fs::temp_directory_path() / ("k3_api_never_" + std::to_string(getpid()));
  const std::string missing =
      error_of([&] { k3::init_checkpoint_from_file("/no/such.json", out.string()); });
  EXPECT_NE(missing.find("cannot open /no/such.json"), std::string::npos) << missing;
  const fs::path bad = fs::temp_directory_path() / ("k3_api_bad_" + std::to_string(getpid()));
  std::ofstream(bad) << "{not json";
  const std::string not_json =
      error_of([&] { k3::init_checkpoint_from_file(bad.string(), out.string()); });
  EXPECT_NE(not_json.find("not valid JSON"), std::string::npos) << not_json;
  fs::remove(bad);
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
