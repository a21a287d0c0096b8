// The device plumbing that runs without a GPU: device selection (EngineOptions::device, then
// K3_DEVICE, then cpu; bad names and a missing CUDA device are clean errors), arenas in a
// backend's memory, and the state pool on a device backend (zeroing, snapshot and
// copy-on-write copies go through the backend, never through host memcpy of device memory).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/cuda.h"
#include "core/arena.h"
#include "engine/state_pool.h"
#include "k3/k3.h"

namespace k3::test {
namespace {

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DeviceSelection, NamesAndErrors) {
  EXPECT_EQ(&backend_named("cpu"), &cpu_backend());
  EXPECT_NE(error_of([] { backend_named("tpu"); }).find("unknown device 'tpu'"), std::string::npos);
  if (!cuda_available()) {
    const std::string e = error_of([] { backend_named("cuda"); });
    EXPECT_NE(e.find("cuda"), std::string::npos) << e;
    EXPECT_NE(e.find(cuda_built() ? "no CUDA device" : "no CUDA backend"), std::string::npos) << e;
  }
}

// Restores K3_DEVICE when a test changes it.
class Env {
 public:
  explicit Env(const char* value) {
    if (const char* old = std::getenv("K3_DEVICE")) old_ = old, had_ = true;
    value ? setenv("K3_DEVICE", value, 1) : unsetenv("K3_DEVICE");
  }
  ~Env() { had_ ? setenv("K3_DEVICE", old_.c_str(), 1) : unsetenv("K3_DEVICE"); }

 private:
  std::string old_;
  bool had_ = false;
};

TEST(DeviceSelection, EngineOptionThenEnvironment) {
  auto model = Model::load(K3_SOURCE_DIR "/tests/data/models/c1_tiny");
  const EngineOptions base{.state_budget_bytes = size_t{16} << 20, .max_sequences = 2};
  {
    Env env(nullptr);
    EngineOptions o = base;
    o.device = "npu";
    EXPECT_NE(error_of([&] { Engine e(*model, o); }).find("unknown device 'npu'"),
              std::string::npos);
    Engine cpu(*model, base);  // default: cpu
    Batch b;
    b.add(cpu.create_sequence(), std::vector<int64_t>{1, 2, 3});
    EXPECT_EQ(cpu.step(b).size(), static_cast<size_t>(model->vocab_size()));
  }
  {
    Env env("bogus");
    EXPECT_NE(error_of([&] { Engine e(*model, base); }).find("unknown device 'bogus'"),
              std::string::npos);
    EngineOptions o = base;
    o.device = "cpu";  // an explicit option wins over the environment
    EXPECT_EQ(error_of([&] { Engine e(*model, o); }), "");
  }
  if (!cuda_available()) {
    Env env("cuda");
    EXPECT_NE(error_of([&] { Engine e(*model, base); }).find("cuda"), std::string::npos);
  }
}

// Host memory posing as a device: counts what the pool asks of it.
class CountingDevice final : public Backend {
 public:
  int allocs = 0, frees = 0, zeros = 0, copies = 0;
  Device device() const override { return Device::cuda; }
  const char* name() const override { return "counting"; }
  void* alloc(size_t n) override {
    ++allocs;
    return std::malloc(n == 0 ? 1 : n);
  }
  void free(void* p) override {
    ++frees;
    std::free(p);
  }
  void copy_to_device(void* d, const void* s, size_t n) override { std::memcpy(d, s, n); }
  void copy_to_host(void* d, const void* s, size_t n) override { std::memcpy(d, s, n); }
  void copy_on_device(void* d, const void* s, size_t n) override {
    ++copies;
    std::memcpy(d, s, n);
  }
  void zero(void* d, size_t n) override {
    ++zeros;
    std::memset(d, 0, n);
  }
  void sync() override {}
  bool supports_op(std::string_view) const override { return false; }
};

TEST(DeviceMemory, ArenaChunksComeFromTheBackend) {
  CountingDevice dev;
  {
    Arena a(256, {[](size_t n, void* u) { return static_cast<Backend*>(u)->alloc(n); },
                  [](void* p, void* u) { static_cast<Backend*>(u)->free(p); }, &dev});
    EXPECT_EQ(dev.allocs, 1);
    a.alloc_bytes(100);
    a.alloc_bytes(4096);  // grows: a second chunk from the backend
    EXPECT_EQ(dev.allocs, 2);
    a.reset();
    a.alloc_bytes(4096);  // reused, no new chunk
    EXPECT_EQ(dev.allocs, 2);
  }
  EXPECT_EQ(dev.frees, 2);
}

TEST(DeviceMemory, StatePoolUsesTheBackendForItsCopies) {
  HParams hp;
  hp.n_layer = 2;
  hp.attn_kind = {AttnKind::kda, AttnKind::mla};
  hp.kda.n_head = 2;
  hp.kda.head_dim = 4;
  hp.kda.conv_kernel = 4;
  hp.mla.kv_lora_rank = 6;
  hp.mla.qk_rope = 2;
  hp.max_positions = 64;
  CountingDevice dev;
  {
    StatePool pool(hp,
                   {.budget_bytes = 1 << 20, .max_entries = 3, .block_tokens = 4, .device = &dev});
    EXPECT_EQ(dev.allocs, 2);  // KDA slots, MLA blocks
    const SeqId a = pool.create();
    EXPECT_EQ(dev.zeros, 1);
    pool.kda(a, 0).S[5] = 2.5f;
    pool.reserve(a, 3);
    for (int64_t t = 0; t < 3; ++t) pool.mla_row(a, 0, t)[0] = float(t + 1);
    pool.advance(a, 3);
    const SnapshotId s = pool.snapshot(a);
    EXPECT_EQ(dev.copies, 1);  // the slot
    const SeqId b = pool.restore(s);
    EXPECT_EQ(dev.copies, 2);
    EXPECT_EQ(pool.kda(b, 0).S[5], 2.5f);
    pool.reserve(b, 1);  // the shared, partly filled tail block is copied first
    EXPECT_EQ(dev.copies, 3);
    EXPECT_EQ(pool.mla(b, 0).row(2)[0], 3.0f);
    EXPECT_NE(pool.mla(b, 0).row(2), pool.mla(a, 0).row(2));
  }
  EXPECT_EQ(dev.frees, 2);
}

}  // namespace
}  // namespace k3::test
