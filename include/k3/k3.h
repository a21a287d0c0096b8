// k3.cpp public API: load a Kimi K3-architecture checkpoint (official layout, memory-mapped)
// and run it. Errors are thrown as k3::Error (a std::runtime_error) with a message that names
// the file, tensor or field at fault.
//
//   auto model = k3::Model::load("path/to/checkpoint");
//   k3::Sequence seq(*model);
//   std::vector<float> logits = seq.prefill({1, 2, 3});   // [3, vocab]
//   std::vector<float> next = seq.decode(4);              // [vocab]
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace k3 {

struct HParams;
class Checkpoint;
struct ModelWeights;
struct SequenceState;

class Model {
 public:
  static std::unique_ptr<Model> load(const std::string& dir);
  ~Model();

  const HParams& hparams() const;
  const Checkpoint& checkpoint() const;
  const ModelWeights& weights() const;
  int64_t vocab_size() const;

 private:
  Model();
  std::unique_ptr<Checkpoint> ckpt_;
  std::unique_ptr<ModelWeights> weights_;
};

// One sequence's decode state (KDA conv + recurrent states, MLA latent cache).
class Sequence {
 public:
  explicit Sequence(const Model& model);
  ~Sequence();

  // Runs tokens through the parallel prefill path (chunked KDA, expanded MLA); returns the
  // logits at every new position, [ids.size(), vocab] row-major.
  std::vector<float> prefill(const std::vector<int64_t>& ids);
  // Runs one token through the recurrent decode path (recurrent KDA, absorbed MLA).
  std::vector<float> decode(int64_t id);
  int64_t n_past() const;
  void reset();
  size_t state_bytes() const;

 private:
  std::vector<float> run(const std::vector<int64_t>& ids, bool decode);
  const Model& model_;
  std::unique_ptr<SequenceState> state_;
};

}  // namespace k3

namespace k3 {
// Worker threads for all ops (default: K3_THREADS, else every core).
void set_num_threads(int n);
int num_threads();
}  // namespace k3
