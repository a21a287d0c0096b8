// The backend layer: Tensor views (strides, rows, view, dtype checks), the Arena (alignment,
// mark/rewind, steady-state reuse), the CPU backend (memory and copies, supports_op), the op
// registry and OpTable dispatch (with a fake device backend), the tensor bindings' contract
// checks and strided-row rms_norm. (parallel_for: test_thread_pool.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/ctx.h"
#include "backend/cuda/cuda.h"
#include "backend/tensor.h"
#include "core/arena.h"
#include "core/error.h"
#include "core/parallel.h"
#include "ops/ops.h"
#include "ops/registry.h"

namespace k3::test {
namespace {

bool aligned64(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

// Runs f and returns the k3::Error message it throws ("" when it does not throw).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// A device backend that only reports Device::cuda (for OpTable::on dispatch).
class FakeCudaBackend final : public Backend {
 public:
  Device device() const override { return Device::cuda; }
  const char* name() const override { return "fake-cuda"; }
  void* alloc(size_t) override { return nullptr; }
  void free(void*) override {}
  void copy_to_device(void*, const void*, size_t) override {}
  void copy_to_host(void*, const void*, size_t) override {}
  void copy_on_device(void*, const void*, size_t) override {}
  void sync() override {}
  bool supports_op(std::string_view) const override { return false; }
};

// ---- Tensor ---------------------------------------------------------------------------------

// The tensor's shape and strides as vectors (ndim entries).
std::pair<std::vector<int64_t>, std::vector<int64_t>> dims(const Tensor& t) {
  return {std::vector<int64_t>(t.shape, t.shape + t.ndim),
          std::vector<int64_t>(t.stride, t.stride + t.ndim)};
}
using V = std::vector<int64_t>;

TEST(Tensor, ContiguousStridesAndNumel) {
  float buf[1];
  const Tensor t1 = Tensor::of(buf, {7}), t2 = Tensor::of(buf, {3, 5});
  const Tensor t3 = Tensor::of(buf, {2, 3, 4});
  const Tensor t4 = Tensor::contiguous(buf, DType::bf16, {2, 3, 4, 5});
  EXPECT_EQ(dims(t1), std::make_pair(V{7}, V{1}));
  EXPECT_EQ(dims(t2), std::make_pair(V{3, 5}, V{5, 1}));
  EXPECT_EQ(dims(t3), std::make_pair(V{2, 3, 4}, V{12, 4, 1}));
  EXPECT_EQ(dims(t4), std::make_pair(V{2, 3, 4, 5}, V{60, 20, 5, 1}));
  EXPECT_EQ((V{t1.numel(), t2.numel(), t3.numel(), t4.numel()}), (V{7, 15, 24, 120}));
  EXPECT_EQ(t4.dtype, DType::bf16);
  EXPECT_EQ(t3.dim(-1), 4);
  for (const Tensor* t : {&t1, &t2, &t3, &t4}) EXPECT_TRUE(t->is_contiguous());
  EXPECT_EQ(Tensor::of(buf, {4, 0, 3}).numel(), 0);
  // 1 to 4 dimensions only.
  EXPECT_THROW(Tensor::of(buf, {1, 2, 2, 2, 2}), Error);
  EXPECT_THROW(Tensor::contiguous(buf, DType::f32, {}), Error);
  EXPECT_THROW(t1.view({1, 2, 2, 2, 2}), Error);
}

TEST(Tensor, IsContiguous) {
  float buf[48];
  const Tensor full = Tensor::of(buf, {4, 3});
  EXPECT_TRUE(full.rows(1, 2).is_contiguous());
  EXPECT_TRUE(full.rows(0, 4).is_contiguous());
  // A [4, 8] window of a [4, 12] buffer.
  Tensor win = Tensor::of(buf, {4, 12});
  win.shape[1] = 8;
  EXPECT_FALSE(win.is_contiguous());
  EXPECT_FALSE(win.rows(1, 2).is_contiguous());
  Tensor tr = Tensor::of(buf, {4, 3});  // strides swapped: a transposed view
  std::swap(tr.stride[0], tr.stride[1]);
  EXPECT_FALSE(tr.is_contiguous());
  Tensor one = Tensor::of(buf, {4, 1, 3});  // a size-1 dimension's stride does not matter
  one.stride[1] = 99;
  EXPECT_TRUE(one.is_contiguous());
}

TEST(Tensor, RowsPointerArithmetic) {
  alignas(64) unsigned char buf[1024];
  const Tensor f = Tensor::of(reinterpret_cast<float*>(buf), {6, 3});
  EXPECT_EQ(f.rows(2, 3).data, buf + 2 * 3 * 4);
  EXPECT_EQ(dims(f.rows(2, 3)), std::make_pair(V{3, 3}, V{3, 1}));
  const Tensor b = Tensor::contiguous(buf, DType::bf16, {6, 5});
  EXPECT_EQ(b.rows(3, 2).data, buf + 3 * 5 * 2);
  const Tensor l = Tensor::of(reinterpret_cast<int64_t*>(buf), {4, 2, 3});
  EXPECT_EQ(l.rows(1, 2).data, buf + 1 * 6 * 8);
  EXPECT_EQ(dims(l.rows(1, 2)), std::make_pair(V{2, 2, 3}, V{6, 3, 1}));
  // Rows of a strided window step by the row stride, not the width.
  Tensor win = Tensor::of(reinterpret_cast<float*>(buf), {4, 12});
  win.shape[1] = 8;
  EXPECT_EQ(win.rows(2, 1).data, buf + 2 * 12 * 4);
  EXPECT_EQ(f.rows(1, 4).rows(2, 2).data, buf + 3 * 3 * 4);
  EXPECT_EQ(f.rows(6, 0).data, buf + 6 * 3 * 4);  // empty, at the end: allowed
  // Out of bounds: k3::Error.
  const Tensor& t = f;
  for (auto [r0, n] : {std::pair{-1, 1}, {0, -1}, {0, 7}, {4, 3}, {7, 0}})
    EXPECT_THROW(t.rows(r0, n), Error) << r0 << "+" << n;
  EXPECT_THROW(t.rows(2, 3).rows(1, 3), Error);
  EXPECT_NO_THROW(t.rows(0, 6));
  EXPECT_TRUE(has(error_of([&] { t.rows(4, 3); }), "rows"));
}

TEST(Tensor, View) {
  float buf[48];
  const Tensor t = Tensor::of(buf, {4, 6});
  const Tensor v = t.view({2, 3, 4});
  EXPECT_EQ(v.data, t.data);
  EXPECT_EQ(dims(v), std::make_pair(V{2, 3, 4}, V{12, 4, 1}));
  EXPECT_THROW(t.view({5, 5}), Error);
  EXPECT_THROW(t.view({25}), Error);
  EXPECT_NE(error_of([&] { t.view({5, 5}); }).find("24"), std::string::npos);
  Tensor win = Tensor::of(buf, {4, 12});
  win.shape[1] = 8;
  EXPECT_THROW(win.view({32}), Error);
  EXPECT_NE(error_of([&] { win.view({32}); }).find("non-contiguous"), std::string::npos);
}

TEST(Tensor, PtrDtypeMismatch) {
  float buf[4];
  const Tensor t = Tensor::of(buf, {4});
  EXPECT_EQ(t.ptr<float>(), buf);
  EXPECT_EQ(t.f32(), buf);
  const std::string msg = error_of([&] { t.ptr<int64_t>(); });
  EXPECT_TRUE(has(msg, "I64") && has(msg, "F32")) << msg;
  const Tensor b = Tensor::contiguous(buf, DType::bf16, {8});
  const std::string msg2 = error_of([&] { b.f32(); });
  EXPECT_TRUE(has(msg2, "BF16") && has(msg2, "F32")) << msg2;
}

// ---- Arena ----------------------------------------------------------------------------------

TEST(Arena, EveryAllocationIs64ByteAligned) {
  Arena a(1000);
  for (size_t n : {0, 1, 3, 63, 64, 65, 127, 500, 999, 4097, 1, 7})
    EXPECT_TRUE(aligned64(a.alloc_bytes(n))) << n;
  EXPECT_TRUE(aligned64(a.alloc<float>(5)));
  Arena empty(0);
  EXPECT_TRUE(aligned64(empty.alloc_bytes(10)));
  EXPECT_TRUE(aligned64(arena_tensor(a, DType::bf16, {3, 7}).data));
}

TEST(Arena, MarkRewindReusesAddresses) {
  Arena a(1024);
  a.alloc_bytes(100);
  const Arena::Mark m = a.mark();
  void* p1 = a.alloc_bytes(200);
  void* p2 = a.alloc_bytes(4000);  // a new chunk
  a.rewind(m);
  EXPECT_EQ(a.alloc_bytes(200), p1);
  EXPECT_EQ(a.alloc_bytes(4000), p2);
  a.rewind(m);
  EXPECT_EQ(a.alloc_bytes(200), p1);
}

TEST(Arena, SteadyStateAfterOneWarmPass) {
  Arena a(1024);
  const std::vector<size_t> seq = {100, 300, 8000, 50, 600, 1, 2000, 64};  // 8000 > 1024
  auto pass = [&] {
    std::vector<void*> out;
    for (size_t n : seq) out.push_back(a.alloc_bytes(n));
    return out;
  };
  const std::vector<void*> warm = pass();
  const size_t cap = a.capacity();
  EXPECT_GE(cap, size_t{8000});
  for (int it = 0; it < 5; ++it) {
    a.reset();
    EXPECT_EQ(pass(), warm) << "pass " << it;
    EXPECT_EQ(a.capacity(), cap) << "pass " << it;
  }
}

TEST(Arena, ScopeRewinds) {
  Arena a(4096);
  void* before = a.alloc_bytes(10);
  void* inner = nullptr;
  {
    ArenaScope s(a);
    inner = a.alloc_bytes(500);
    EXPECT_NE(inner, before);
    {
      ArenaScope s2(a);
      a.alloc_bytes(10000);
    }
    EXPECT_NE(a.alloc_bytes(1), inner);
  }
  EXPECT_EQ(a.alloc_bytes(500), inner);
}

// ---- CPU backend ----------------------------------------------------------------------------

TEST(CpuBackend, CopiesRoundTrip) {
  Backend& b = cpu_backend();
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(1, 255);  // never zero
  for (size_t n : {size_t{1}, size_t{63}, size_t{1001}, size_t{1} << 16}) {
    std::vector<unsigned char> src(n), back(n, 0);
    for (auto& c : src) c = static_cast<unsigned char>(byte(rng));
    void* d1 = b.alloc(n);
    void* d2 = b.alloc(n);
    ASSERT_TRUE(d1 != nullptr && d2 != nullptr);
    EXPECT_TRUE(aligned64(d1) && aligned64(d2));
    b.copy_to_device(d1, src.data(), n);
    b.copy_on_device(d2, d1, n);
    std::memset(d1, 0, n);
    b.sync();
    b.copy_to_host(back.data(), d2, n);
    EXPECT_EQ(back, src) << n;
    b.free(d1);
    b.free(d2);
  }
}

// copy_rows_to_host_async (row r from src + r·spitch to dst + r·dpitch) into alloc_host memory,
// waited for by sync(); the bytes between the destination rows are kept.
void check_row_copies(Backend& b) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> byte(1, 255);
  for (auto [rows, width, spitch, dpitch] : {std::tuple<size_t, size_t, size_t, size_t>{1, 1, 1, 1},
                                             {3, 40, 64, 100},
                                             {64, 4096, 4096, 40000},
                                             {0, 8, 8, 8}}) {
    std::vector<unsigned char> src(std::max<size_t>(rows * spitch, 1));
    for (auto& c : src) c = static_cast<unsigned char>(byte(rng));
    void* d = b.alloc(src.size());
    b.copy_to_device(d, src.data(), src.size());
    const size_t n = std::max<size_t>(rows * dpitch, 1);
    auto* host = static_cast<unsigned char*>(b.alloc_host(n));
    std::memset(host, 0, n);
    b.copy_rows_to_host_async(host, dpitch, d, spitch, width, rows);
    b.sync();
    std::vector<unsigned char> want(n, 0);
    for (size_t r = 0; r < rows; ++r) std::memcpy(&want[r * dpitch], &src[r * spitch], width);
    EXPECT_EQ(std::vector<unsigned char>(host, host + n), want) << b.name() << " rows " << rows;
    b.free_host(host);
    b.free(d);
  }
}

TEST(CpuBackend, RowCopiesToHostMemory) { check_row_copies(cpu_backend()); }

TEST(CudaBackend, RowCopiesToPinnedMemory) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  check_row_copies(cuda_backend());
}

TEST(CpuBackend, IdentityAndSupportsOps) {
  Backend& b = cpu_backend();
  EXPECT_EQ(&b, &cpu_backend());
  EXPECT_EQ(b.device(), Device::cpu);
  EXPECT_STREQ(b.name(), "cpu");
  ASSERT_FALSE(registered_ops().empty());
  for (const OpInfo& o : registered_ops()) EXPECT_TRUE(b.supports_op(o.name)) << o.name;
  EXPECT_FALSE(b.supports_op("no_such_op"));
  EXPECT_FALSE(b.supports_op(""));
}

// ---- Registry -------------------------------------------------------------------------------

TEST(Registry, EveryOpHasRefAndCpuAndUniqueName) {
  std::set<std::string> names;
  for (const OpInfo& o : registered_ops()) {
    EXPECT_TRUE(o.has_ref) << o.name;
    EXPECT_TRUE(o.has_cpu) << o.name;
    EXPECT_TRUE(names.insert(o.name).second) << "duplicate " << o.name;
    EXPECT_EQ(find_op(o.name), &o) << o.name;
  }
  for (const char* n : {"linear", "rms_norm", "add"}) EXPECT_TRUE(names.count(n)) << n;
  EXPECT_EQ(find_op("linear")->name, "linear");
  EXPECT_EQ(find_op("no_such_op"), nullptr);
  EXPECT_EQ(find_op("linea"), nullptr);
}

void impl_ref(int* p) { *p = 1; }
void impl_cpu(int* p) { *p = 2; }
void impl_cuda(int* p) { *p = 3; }

TEST(Registry, OpTableDispatch) {
  Arena arena(1024);
  FakeCudaBackend fake;
  Ctx cpu_ctx{cpu_backend(), arena, nullptr};
  Ctx cuda_ctx{fake, arena, nullptr};
  OpTable<void(int*)> with{"test_with", impl_ref, impl_cpu, impl_cuda, nullptr};
  OpTable<void(int*)> without{"test_without", impl_ref, impl_cpu, nullptr, nullptr};
  EXPECT_EQ(with.on(cpu_ctx), &impl_cpu);
  EXPECT_EQ(with.on(cuda_ctx), &impl_cuda);
  EXPECT_EQ(without.on(cpu_ctx), &impl_cpu);
  EXPECT_EQ(without.on(cuda_ctx), &impl_cpu);
  int v = 0;
  with.on(cuda_ctx)(&v);
  EXPECT_EQ(v, 3);
  // The real tables: the CPU ctx gets cpu; a cuda ctx gets the cuda slot (filled when the
  // CUDA backend is built), else falls back to cpu.
  EXPECT_EQ(kLinearOp.on(cpu_ctx), kLinearOp.cpu);
  EXPECT_EQ(kLinearOp.on(cuda_ctx), kLinearOp.cuda != nullptr ? kLinearOp.cuda : kLinearOp.cpu);
  EXPECT_EQ(kLinearOp.cuda != nullptr, cuda_built());
  EXPECT_NE(kLinearOp.cpu, nullptr);
  EXPECT_EQ(find_op("test_with"), nullptr);  // local tables stay out of the registry
}

// ---- Bindings -------------------------------------------------------------------------------

TEST(Bindings, LinearShapeMismatchNamesOp) {
  Arena arena;
  Ctx ctx{cpu_backend(), arena, nullptr};
  std::vector<float> wbuf(3 * 5, 0.5f), xbuf(2 * 5, 1.0f), ybuf(2 * 3, 0.0f);
  const Mat w{.rows = 3, .cols = 5, .format = MatFormat::f32, .data = wbuf.data()};
  const Tensor x = Tensor::of(xbuf.data(), {2, 5}), y = Tensor::of(ybuf.data(), {2, 3});
  ASSERT_NO_THROW(op::linear(ctx, x, w, y));
  EXPECT_FLOAT_EQ(ybuf[0], 2.5f);
  auto msg_of = [&](const Tensor& xx, const Tensor& yy) {
    return error_of([&] { op::linear(ctx, xx, w, yy); });
  };
  float *xd = xbuf.data(), *yd = ybuf.data();
  EXPECT_TRUE(has(msg_of(Tensor::of(xd, {2, 4}), y), "linear"));  // x cols 4 != 5
  EXPECT_TRUE(has(msg_of(x, Tensor::of(yd, {3, 2})), "linear"));  // y cols 2 != 3
  EXPECT_TRUE(has(msg_of(x, Tensor::of(yd, {1, 3})), "linear"));  // y rows 1 != 2
  EXPECT_TRUE(has(msg_of(Tensor::of(xd, {1, 2, 5}), Tensor::of(yd, {1, 3})), "linear"));
}

TEST(Bindings, AddSizeMismatchThrows) {
  Arena arena;
  Ctx ctx{cpu_backend(), arena, nullptr};
  float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {10, 20, 30, 40, 50, 60}, y[6] = {};
  EXPECT_THROW(op::add(ctx, Tensor::of(a, {4}), Tensor::of(b, {4}), Tensor::of(y, {5})), Error);
  EXPECT_THROW(op::add(ctx, Tensor::of(a, {2, 3}), Tensor::of(b, {3, 2}), Tensor::of(y, {2, 3})),
               Error);
  auto a4_b5 = [&] { op::add(ctx, Tensor::of(a, {4}), Tensor::of(b, {5}), Tensor::of(y, {4})); };
  EXPECT_TRUE(has(error_of(a4_b5), "add"));
  op::add(ctx, Tensor::of(a, {2, 3}), Tensor::of(b, {2, 3}), Tensor::of(y, {2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y[i], a[i] + b[i]);
}

TEST(Bindings, RmsNormOnStridedRows) {
  Arena arena;
  Ctx ctx{cpu_backend(), arena, nullptr};
  constexpr int64_t T = 5, W = 12, N = 8;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> orig(T * W), w(N);
  for (float& v : orig) v = dist(rng);
  for (float& v : w) v = dist(rng);
  for (int64_t c0 : {0, 4}) {  // the first 8 columns (MLA's latent rows), then the last 8
    std::vector<float> buf = orig, packed(T * N), want(T * N), got(T * N, 0.0f);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < N; ++i) packed[t * N + i] = orig[t * W + c0 + i];
    op::rms_norm(ctx, Tensor::of(packed.data(), {T, N}), w, 1e-6f, Tensor::of(want.data(), {T, N}));
    Tensor win = Tensor::of(buf.data() + c0, {T, N});
    win.stride[0] = W;
    op::rms_norm(ctx, win, w, 1e-6f, Tensor::of(got.data(), {T, N}));  // strided x, packed y
    EXPECT_EQ(got, want) << c0;
    EXPECT_EQ(buf, orig) << c0;
    op::rms_norm(ctx, win, w, 1e-6f, win);  // in place on the window
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < W; ++i) {
        const float expect = i >= c0 && i < c0 + N ? want[t * N + i - c0] : orig[t * W + i];
        EXPECT_EQ(buf[t * W + i], expect) << "window at " << c0 << ": row " << t << " col " << i;
      }
    EXPECT_THROW(op::rms_norm(ctx, win, std::span<const float>(w.data(), 7), 1e-6f, win), Error);
  }
}

}  // namespace
}  // namespace k3::test

namespace k3 {
namespace {

// Regressions for binding checks: a y with the right outer dims but the wrong element count,
// and overlapping strided rows, are refused instead of written out of bounds.
TEST(Bindings, LinearRefusesAWrongSizedOutputAndRmsNormOverlappingRows) {
  Arena arena;
  Ctx ctx{cpu_backend(), arena};
  std::vector<float> w(3 * 4, 0.5f), x(2 * 4, 1.0f), y(12, 0.0f);
  const Mat m{3, 4, MatFormat::f32, w.data(), nullptr};
  EXPECT_THROW(op::linear(ctx, Tensor::of(x.data(), {2, 4}), m, Tensor::of(y.data(), {2, 0, 3})),
               Error);
  EXPECT_THROW(op::linear(ctx, Tensor::of(x.data(), {2, 4}), m, Tensor::of(y.data(), {2, 2, 3})),
               Error);
  std::vector<float> buf(5 * 4, 1.0f), gain(8, 1.0f);
  const Tensor overlapping = Tensor::strided(buf.data(), DType::f32, {3, 8}, {4, 1});
  EXPECT_THROW(op::rms_norm(ctx, overlapping, gain, 1e-6f, overlapping), Error);
}

}  // namespace
}  // namespace k3
