#include "ops/harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "backend/cuda/cuda.h"
#include "core/cpu_isa.h"
#include "ops/ops.h"

namespace k3::test {

std::vector<OpCase>& op_registry() {
  static std::vector<OpCase> cases;
  return cases;
}

std::vector<PerfCase>& perf_registry() {
  static std::vector<PerfCase> cases;
  return cases;
}

RegisterPerf::RegisterPerf(std::vector<PerfCase> cases) {
  for (PerfCase& c : cases) perf_registry().push_back(std::move(c));
}

Register::Register(std::vector<OpCase> cases) {
  for (OpCase& c : cases) op_registry().push_back(std::move(c));
}

double rel_max_error(const std::vector<float>& got, const std::vector<double>& want, double scale) {
  double err = 0, max_want = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    err = std::max(err, std::fabs(got[i] - want[i]));
    max_want = std::max(max_want, std::fabs(want[i]));
  }
  if (scale <= 0) scale = max_want;
  return scale > 0 ? err / scale : err;
}

namespace {

// One gtest instance: a case run with one of its op's implementations (the cpu one on one
// instruction-set path).
struct CaseImpl {
  size_t index;  // into op_registry()
  Impl impl;
  Isa isa;
};

// The CPU paths under test: every one this machine supports, or only K3_ISA's when it is set
// (K3_ISA=avx512 test_ops runs the AVX-512 kernels alone; an unsupported value stops the
// binary at start-up with a message).
std::vector<Isa> isas_under_test() {
  if (const char* env = std::getenv("K3_ISA"); env != nullptr && *env != '\0')
    return {parse_isa(env)};
  return supported_isas();
}

// Every (case, implementation other than ref, CPU path) triple. A case naming an unknown op
// still gets one (cpu) instance, which fails and says so.
std::vector<CaseImpl> case_impls() {
  std::vector<CaseImpl> v;
  for (size_t i = 0; i < op_registry().size(); ++i) {
    const OpInfo* info = find_op(op_registry()[i].op);
    if (info == nullptr || info->has_cpu)
      for (Isa isa : isas_under_test()) v.push_back({i, Impl::cpu, isa});
    if (info != nullptr && info->has_cuda) v.push_back({i, Impl::cuda, active_isa()});
  }
  return v;
}

// Runs the test body on one instruction-set path and restores the start-up one.
struct IsaScope {
  Isa saved = active_isa();
  explicit IsaScope(Isa isa) { set_isa(isa); }
  ~IsaScope() { set_isa(saved); }
};

// A case's inputs follow from its op and shape alone (FNV-1a of both), so registering a new
// case anywhere leaves every other case's inputs as they were. K3_OPS_SEED=N draws every case
// afresh (another draw per N): a bound that holds only on its usual draw shows up there.
uint64_t case_seed(const OpCase& c) {
  uint64_t h = 0xcbf29ce484222325ull;
  if (const char* env = std::getenv("K3_OPS_SEED"); env != nullptr && *env != '\0')
    h ^= std::strtoull(env, nullptr, 10) * 0x9e3779b97f4a7c15ull;
  for (const std::string* s : {&c.op, &c.shape}) {
    for (unsigned char ch : *s) h = (h ^ ch) * 0x100000001b3ull;
    h = (h ^ 0xff) * 0x100000001b3ull;
  }
  return h;
}

class OpTest : public ::testing::TestWithParam<CaseImpl> {};

TEST_P(OpTest, MatchesReference) {
  const auto [index, impl, isa] = GetParam();
  const IsaScope on_path(isa);
  const OpCase& c = op_registry()[index];
  ASSERT_NE(find_op(c.op), nullptr) << "case for unregistered op '" << c.op << "'";
  if (impl == Impl::cuda && !cuda_available()) GTEST_SKIP() << "no CUDA device";
  std::mt19937_64 rng(case_seed(c));
  // The cases hand host buffers to every implementation; the cuda launchers stage them.
  struct Staging {
    explicit Staging(bool on) : on_(on) { cuda_set_host_staging(on_); }
    ~Staging() { cuda_set_host_staging(false); }
    bool on_;
  } staging(impl == Impl::cuda);
  Outputs out = c.run(rng, impl);
  ASSERT_EQ(out.got.size(), out.want.size()) << c.op << " " << c.shape;
  ASSERT_FALSE(out.want.empty()) << c.op << " " << c.shape;
  const double err = rel_max_error(out.got, out.want, out.scale);
  if (const char* v = std::getenv("K3_OPS_VERBOSE"); v != nullptr && *v == '1') {
    std::printf("  error %.3e of %.1e: %s (%s) [%s]\n", err, c.tol, c.op.c_str(), impl_name(impl),
                c.shape.c_str());  // how far below its bound a case is
  }
  EXPECT_LE(err, c.tol) << c.op << " (" << impl_name(impl) << ", " << isa_name(isa) << ") ["
                        << c.shape << "]";
}

std::string case_name(const ::testing::TestParamInfo<CaseImpl>& info) {
  const OpCase& c = op_registry()[info.param.index];
  std::string s = c.op + "_" + c.shape;
  for (char& ch : s) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  std::string impl = impl_name(info.param.impl);
  if (info.param.impl == Impl::cpu) impl += std::string("_") + isa_name(info.param.isa);
  return s + "_" + impl + "_" + std::to_string(info.param.index);
}

// A static library drops object files nothing references, and an op missing from this
// binary would escape the checks below: the tensor bindings call every op the model uses,
// so linking them brings all those ops in.
void link_every_model_op() {
  static void (*volatile keep)(Ctx&, const Tensor&, const Mat&, const Tensor&) = &op::linear;
  (void)keep;
}

TEST(OpRegistry, EveryOpHasRefCpuAndCases) {
  link_every_model_op();
  ASSERT_FALSE(registered_ops().empty());
  for (const OpInfo& o : registered_ops()) {
    EXPECT_TRUE(o.has_ref) << o.name << " has no ref";
    EXPECT_TRUE(o.has_cpu) << o.name << " has no cpu implementation";
    const auto n = std::count_if(op_registry().begin(), op_registry().end(),
                                 [&](const OpCase& c) { return c.op == o.name; });
    EXPECT_GT(n, 0) << "registered op '" << o.name << "' has no OpCase in tests/ops";
  }
}

TEST(OpRegistry, EveryCaseNamesARegisteredOp) {
  for (const OpCase& c : op_registry())
    EXPECT_NE(find_op(c.op), nullptr) << "case '" << c.shape << "' names unknown op " << c.op;
}

// Disabled by default (timings belong in benchmarks); bench/ops_perf.sh runs it.
TEST(OpPerf, DISABLED_AllCases) {
  std::printf("%-16s %-36s %10s %9s %8s\n", "op", "shape", "median ms", "GFLOP/s", "GB/s");
  for (size_t i = 0; i < perf_registry().size(); ++i) {
    const PerfCase& c = perf_registry()[i];
    std::mt19937_64 rng(0x9e3779b9 + i);
    std::function<void()> run = c.prepare(rng);
    run();  // warm-up: first touch of buffers
    std::vector<double> ms;
    for (int r = 0; r < 7; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      run();
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2];
    std::printf("%-16s %-36s %10.3f %9.2f %8.2f\n", c.op.c_str(), c.shape.c_str(), med,
                c.flops / med * 1e-6, c.bytes / med * 1e-6);
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, OpTest, ::testing::ValuesIn(case_impls()), case_name);

}  // namespace
}  // namespace k3::test
