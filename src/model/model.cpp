// k3::Model and k3::Sequence: the public facade over the loader and the engine.
#include "k3/model.h"

#include "core/error.h"
#include "k3/engine.h"
#include "loader/checkpoint.h"
#include "model/weights.h"

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
int64_t Model::max_positions() const { return hparams().max_positions; }

Sequence::Sequence(const Model& model)
    : engine_(std::make_unique<Engine>(
          model, EngineOptions{Engine::budget_for(model, 1, model.max_positions()), 1})),
      seq_(engine_->create_sequence()) {}
Sequence::~Sequence() = default;

std::vector<float> Sequence::run(const std::vector<int64_t>& ids) {
  check(!ids.empty(), "no tokens to run");
  Batch b;
  b.add(seq_, ids, Batch::Logits::all);
  return engine_->step(b);
}

std::vector<float> Sequence::prefill(const std::vector<int64_t>& ids) { return run(ids); }
std::vector<float> Sequence::decode(int64_t id) { return run({id}); }
int64_t Sequence::n_past() const { return engine_->n_past(seq_); }
void Sequence::reset() { engine_->reset(seq_); }
size_t Sequence::state_bytes() const { return engine_->state_bytes(seq_); }
void Sequence::set_cancel_flag(const std::atomic<bool>* flag) { engine_->set_cancel_flag(flag); }

}  // namespace k3
