// k3::Model and k3::Sequence: the public facade over the loader and the forward pass.
#include "core/error.h"
#include "k3/k3.h"
#include "loader/checkpoint.h"
#include "model/forward.h"

namespace k3 {

Model::Model() = default;
Model::~Model() = default;

std::unique_ptr<Model> Model::load(const std::string& dir) {
  std::unique_ptr<Model> m(new Model());
  m->ckpt_ = std::make_unique<Checkpoint>(dir);
  m->weights_ = std::make_unique<ModelWeights>(bind_weights(*m->ckpt_));
  return m;
}

const HParams& Model::hparams() const { return ckpt_->hparams(); }
const Checkpoint& Model::checkpoint() const { return *ckpt_; }
const ModelWeights& Model::weights() const { return *weights_; }
int64_t Model::vocab_size() const { return hparams().vocab; }

Sequence::Sequence(const Model& model)
    : model_(model), state_(std::make_unique<SequenceState>(model.hparams())) {}
Sequence::~Sequence() = default;

std::vector<float> Sequence::run(const std::vector<int64_t>& ids, bool decode) {
  const HParams& hp = model_.hparams();
  check(!ids.empty(), "no tokens to run");
  check(state_->n_past + static_cast<int64_t>(ids.size()) <= hp.max_positions, "sequence of ",
        state_->n_past + static_cast<int64_t>(ids.size()),
        " tokens exceeds max_position_embeddings (", hp.max_positions, ")");
  std::vector<float> logits(ids.size() * static_cast<size_t>(hp.vocab));
  forward(model_.weights(), hp, *state_, ids.data(), static_cast<int64_t>(ids.size()),
          decode ? Pass::decode : Pass::prefill, logits.data());
  return logits;
}

std::vector<float> Sequence::prefill(const std::vector<int64_t>& ids) { return run(ids, false); }
std::vector<float> Sequence::decode(int64_t id) { return run({id}, true); }
int64_t Sequence::n_past() const { return state_->n_past; }
void Sequence::reset() { state_->reset(); }
size_t Sequence::state_bytes() const { return state_->bytes(); }

}  // namespace k3
