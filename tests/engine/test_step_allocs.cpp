// Steady-state steps allocate nothing on the heap: after warm-up, 32 decode steps of a batch
// (one token per sequence per step) must make zero calls to operator new. The step tensors
// come from the engine's arena, kernel scratch is per-thread and kept, the pool and the plan
// are sized at construction, and a reused Batch keeps its capacity.
#include <gtest/gtest.h>

#include <random>

#include "engine/alloc_counter.h"
#include "k3/k3.h"

namespace k3 {
namespace {

int64_t allocations_in_decode_steps(const std::string& model_dir, int64_t B) {
  auto model = Model::load(model_dir);
  Engine engine(*model, {Engine::budget_for(*model, B, 256), B});
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> tok(0, model->vocab_size() - 1);
  std::vector<SeqId> seqs;
  Batch batch;
  for (int64_t b = 0; b < B; ++b) {  // prompts of different lengths
    seqs.push_back(engine.create_sequence());
    std::vector<int64_t> prompt(static_cast<size_t>(5 + 7 * b));
    for (int64_t& t : prompt) t = tok(rng);
    batch.add(seqs.back(), prompt);
  }
  std::vector<float> logits(static_cast<size_t>(B * model->vocab_size()));
  engine.step(batch, logits.data());
  std::vector<int64_t> next(static_cast<size_t>(B));
  auto decode_step = [&] {
    batch.clear();
    for (int64_t b = 0; b < B; ++b) {
      next[b] = tok(rng);
      batch.add(seqs[b], std::span(&next[b], 1));
    }
    engine.step(batch, logits.data());
  };
  for (int i = 0; i < 3; ++i) decode_step();  // warm-up: arena and kernel scratch reach size
  // Pool threads claim chunks of work as they come, so a thread may first run some kernel (and
  // grow its scratch once) a few steps later: the steady state is reached when a whole run of
  // 32 steps allocates nothing, within a bounded number of runs.
  int64_t allocated = 0;
  for (int run = 0; run < 16; ++run) {
    const int64_t before = test::allocation_count();
    for (int i = 0; i < 32; ++i) decode_step();
    allocated = test::allocation_count() - before;
    if (allocated == 0) break;
  }
  return allocated;
}

TEST(StepAllocations, CounterIsInEffect) {
  const int64_t before = test::allocation_count();
  ::operator delete(::operator new(16));  // a new-expression could be elided
  EXPECT_EQ(test::allocation_count(), before + 1);
}

TEST(StepAllocations, ZeroPerSteadyStateDecodeStep) {
  for (const char* dir :
       {K3_SOURCE_DIR "/tests/data/models/c2_13layer", K3_PUBLIC_GOLDEN_DIR "/p1_mxfp4_7layer"}) {
    for (int64_t B : {1, 4}) {
      EXPECT_EQ(allocations_in_decode_steps(dir, B), 0) << dir << " batch " << B;
    }
  }
}

// The same in q8 precision (int8 activations for the MXFP4 experts: their quantised rows live in
// per-thread scratch too).
TEST(StepAllocations, ZeroPerSteadyStateDecodeStepInQ8Precision) {
  set_cpu_precision("q8");
  for (int64_t B : {1, 4}) {
    EXPECT_EQ(allocations_in_decode_steps(K3_PUBLIC_GOLDEN_DIR "/p1_mxfp4_7layer", B), 0)
        << "batch " << B;
  }
  set_cpu_precision("fp32");
}

}  // namespace
}  // namespace k3
