// Loading a Kimi K3-architecture checkpoint (official layout, memory-mapped, validated) and
// the simplest way to run it: one Sequence. Errors are thrown as k3::Error (a
// std::runtime_error) with a message that names the file, tensor or field at fault.
//
//   auto model = k3::Model::load("path/to/checkpoint");
//   k3::Sequence seq(*model);
//   std::vector<float> logits = seq.prefill({1, 2, 3});   // [3, vocab]
//   std::vector<float> next = seq.decode(4);              // [vocab]
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace k3 {

struct HParams;
class Checkpoint;
struct ModelWeights;
class Engine;

class Model {
 public:
  static std::unique_ptr<Model> load(const std::string& dir);
  ~Model();

  const HParams& hparams() const;
  const Checkpoint& checkpoint() const;
  const ModelWeights& weights() const;
  int64_t vocab_size() const;
  int64_t max_positions() const;

 private:
  Model();
  std::unique_ptr<Checkpoint> ckpt_;
  std::unique_ptr<ModelWeights> weights_;
};

// One sequence on its own engine (state for up to max_position_embeddings tokens, reserved
// as virtual memory and committed as it fills). For many sequences at once use k3::Engine.
class Sequence {
 public:
  explicit Sequence(const Model& model);
  ~Sequence();

  // Runs tokens as one chunk (chunked KDA; expanded MLA on an empty sequence, absorbed over
  // the cache otherwise); returns the logits at every new position, [ids.size(), vocab].
  std::vector<float> prefill(const std::vector<int64_t>& ids);
  // Runs one token through the recurrent forms (recurrent KDA, absorbed MLA); [vocab].
  std::vector<float> decode(int64_t id);
  int64_t n_past() const;
  void reset();
  size_t state_bytes() const;
  // While *flag is true, prefill() and decode() throw k3::Cancelled (polled between layers; see
  // Engine::set_cancel_flag). After one thrown mid-way, the state is inconsistent and every
  // run refuses until reset(). nullptr turns polling off.
  void set_cancel_flag(const std::atomic<bool>* flag);

 private:
  std::vector<float> run(const std::vector<int64_t>& ids);
  std::unique_ptr<Engine> engine_;
  int64_t seq_;
};

// Worker threads for all ops (default: K3_THREADS, else the physical cores).
void set_num_threads(int n);
int num_threads();

// The CPU kernels' instruction-set path chosen at start-up: "scalar", "avx2" or "avx512"
// (the best this CPU supports, or K3_ISA).
std::string cpu_isa_name();

// The CPU matmuls' arithmetic (linear with BF16 / MXFP4 weights): "fp32" (the default, held
// to the golden references) or "bf16" (activations rounded to bf16 once per row, fp32
// accumulation; vdpbf16ps where the CPU has AVX512_BF16) or "q8" (as bf16, and the MXFP4
// matmuls with int8 activations, integer dots). Default: K3_PRECISION, else fp32.
// Throws k3::Error for another name. docs/CPU.md gives the bf16 and q8 modes' tolerances.
void set_cpu_precision(const std::string& name);
// "fp32", "bf16 (vdpbf16ps)", "bf16 (fp32 FMA of bf16 products)" or "q8 (MXFP4 x int8: KERNEL;
// else BF16-NAME)".
std::string cpu_precision_name();

}  // namespace k3
