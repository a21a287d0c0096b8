// The training loop behind k3/train.h.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>

#include "core/error.h"
#include "k3/model.h"
#include "k3/router_balance.h"
#include "k3/train.h"
#include "loader/checkpoint.h"
#include "loader/tensor_table.h"
#include "train/cuda/gpu_batch.h"
#include "train/lr_schedule.h"
#include "train/model_balance.h"
#include "train/optimizer.h"
#include "train/train_checkpoint.h"
#include "train/train_data.h"
#include "train/window_batch.h"

namespace k3 {
namespace {

using namespace train;  // NOLINT: the training building blocks

balance::Method balance_method(const std::string& name) {
  return balance::parse_method(name == "lossfree" ? "loss-free" : name);
}

void validate(const TrainConfig& c) {
  check(c.model_dir.empty() != c.resume_dir.empty(),
        "train: give an initial checkpoint or a checkpoint to resume, exactly one");
  check(!c.out_dir.empty(), "train: no output directory");
  check(c.seq_len >= 1 && c.micro_batch >= 1 && c.accumulation >= 1 && c.steps >= 1,
        "train: seq_len, micro_batch, accumulation and steps must be at least 1");
  check(c.lr > 0 && std::isfinite(c.lr), "train: the learning rate must be positive");
  check(c.optimizer == "muon" || c.optimizer == "adamw", "train: unknown optimizer '", c.optimizer,
        "' (muon or adamw)");
  check(c.eval_windows >= 1, "train: eval_windows must be at least 1");
  check(c.device == "cpu" || c.device == "cuda", "train: unknown device '", c.device,
        "' (cpu or cuda)");
  check(c.mtp_weight >= 0 && std::isfinite(c.mtp_weight),
        "train: the MTP loss weight must be a finite number >= 0");
}

std::vector<train::Param> optimizer_params(const HParams& hp, ParamSet& params, ParamSet& grads,
                                           bool adamw_only) {
  std::vector<train::Param> ps;
  for (const auto& [name, p] : params.all()) {
    ParamGroup g = param_group(name, hp, true);
    if (adamw_only && g.update == Update::muon) g = {Update::adamw, HeadAxis::none, 1, true};
    ps.push_back({name, p.shape, params[name], grads[name], g});
  }
  return ps;
}

// "1h02m", "4m05s", "12s": the time left, for the progress line.
std::string duration_text(double seconds) {
  const long long s = std::llround(std::max(0.0, seconds));
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, s % 3600 / 60);
  } else if (s >= 60) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%llds", s);
  }
  return buf;
}

// eta_s: the estimated time to the run's last step (negative: not known yet).
std::string progress_line(const TrainPoint& p, int64_t total, double eta_s) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "step %lld/%lld  loss %.4f  lr %.3e  maxvio %.3f  |g| %.3f  %.0f tok/s",
                static_cast<long long>(p.step), static_cast<long long>(total), p.loss, p.lr,
                p.max_vio, p.grad_norm, p.tokens_per_s);
  std::string s = buf;
  if (eta_s >= 0 && p.step < total) s += "  eta " + duration_text(eta_s);
  if (!std::isnan(p.val_loss)) {
    std::snprintf(buf, sizeof buf, "  val %.4f  ppl %.2f  bpb %.4f", p.val_loss,
                  std::exp(p.val_loss), p.val_bpb);
    s += buf;
  }
  return s;
}

class Trainer {
 public:
  explicit Trainer(const TrainConfig& c)
      : cfg_(c),
        src_(c.resume_dir.empty() ? c.model_dir : c.resume_dir),
        tok_dir_(c.tokenizer_dir.empty() ? src_ : c.tokenizer_dir),
        ckpt_(std::make_unique<Checkpoint>(src_)),
        hp_(ckpt_->hparams()),
        params_(ParamSet::from_checkpoint(*ckpt_)),
        grads_(params_.zeros_like()),
        opt_(optimizer_params(hp_, params_, grads_, c.optimizer == "adamw"),
             OptimizerConfig{.weight_decay = static_cast<float>(c.weight_decay)}),
        bal_(hp_, params_, balance::BalancerConfig{balance_method(c.balance), 0}),
        rng_(c.seed) {
    ckpt_.reset();  // the fp32 copy is all we need; frees the mapping
    const Tokenizer tok = Tokenizer::load(tok_dir_);
    data_ = tokenize_files(tok, c.data_files, hp_.vocab);
    if (!c.val_file.empty()) val_ = tokenize_files(tok, {c.val_file}, hp_.vocab);
    sched_.shape = parse_lr_shape(c.schedule);
    sched_.peak = c.lr;
    sched_.min = c.lr * c.min_lr_ratio;
    sched_.warmup = c.warmup;
    sched_.total = c.steps;
    sched_.validate();
    if (!c.resume_dir.empty()) resume();
    if (c.device == "cuda") {
      gpu_ = std::make_unique<GpuBatch>(hp_, params_, c.micro_batch);
      // Muon's Newton–Schulz on the device too (+15% tokens/s on an H100 at the default config);
      // K3_TRAIN_NS_ON_DEVICE=0 keeps it on the host.
      const char* ns = std::getenv("K3_TRAIN_NS_ON_DEVICE");
      if (ns == nullptr || std::string(ns) != "0") opt_.set_orthogonalizer(orthogonalize_on_device);
    }
  }

  TrainResult run() {
    const int64_t end = cfg_.stop_after > 0 ? std::min(cfg_.steps, cfg_.stop_after) : cfg_.steps;
    double tokens = 0, seconds = 0;
    const int64_t first_step = state_.step;  // a resumed run times only its own steps
    const auto started = std::chrono::steady_clock::now();
    while (state_.step < end) {
      const auto t0 = std::chrono::steady_clock::now();
      TrainPoint p = step();
      const double dt =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double n = double(cfg_.seq_len * cfg_.micro_batch * cfg_.accumulation);
      p.tokens_per_s = n / dt;
      tokens += n;
      seconds += dt;
      if (!val_.ids.empty() && cfg_.eval_every > 0 &&
          (p.step % cfg_.eval_every == 0 || p.step == end)) {
        const EvalResult e = evaluate_val();
        p.val_loss = e.loss;
        p.val_bpb = e.bits_per_byte;
      }
      state_.history.push_back(p);
      if (cfg_.log && (p.step % cfg_.log_every == 0 || p.step == end || !std::isnan(p.val_loss))) {
        const double wall =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
                .count();  // evaluations too
        cfg_.log(progress_line(p, cfg_.steps,
                               wall / double(p.step - first_step) * double(end - p.step)));
      }
      if (cfg_.save_every > 0 && p.step % cfg_.save_every == 0 && p.step != end) save();
    }
    save();
    return {state_.history, seconds > 0 ? tokens / seconds : 0, pass_seconds_, update_seconds_};
  }

 private:
  TrainPoint step() {
    zero_grads(opt_.params());
    const int64_t seqs = cfg_.micro_batch * cfg_.accumulation;
    std::vector<Window> windows;
    for (int64_t i = 0; i < seqs; ++i) windows.push_back(sample_window(data_, cfg_.seq_len, rng_));
    TrainOptions opt;
    opt.mtp_weight = cfg_.mtp_weight;
    const auto t0 = std::chrono::steady_clock::now();
    const double loss = gpu_ ? gpu_->run(params_, windows, grads_, bal_.hook(), opt)
                             : batch_.run(hp_, params_, windows, grads_, bal_.hook(), opt);
    const auto t1 = std::chrono::steady_clock::now();
    TrainPoint p;
    p.grad_norm =
        scale_grads_and_clip(opt_.params(), static_cast<float>(1.0 / double(seqs)), cfg_.clip);
    p.lr = sched_.at(state_.step);
    opt_.step(static_cast<float>(p.lr));
    p.max_vio = bal_.finish_step(params_).worst;
    const auto t2 = std::chrono::steady_clock::now();
    pass_seconds_ += std::chrono::duration<double>(t1 - t0).count();
    update_seconds_ += std::chrono::duration<double>(t2 - t1).count();
    p.loss = loss / double(seqs);
    p.step = ++state_.step;
    return p;
  }

  EvalResult evaluate_val() {
    if (!gpu_) return evaluate(hp_, params_, val_, cfg_.seq_len, cfg_.eval_windows);
    return evaluate_with(val_, cfg_.seq_len, cfg_.eval_windows, [&](const std::vector<Window>& w) {
      TrainOptions o;
      o.loss_only = true;
      return gpu_->run(params_, w, grads_, nullptr, o);
    });
  }

  void resume() {
    state_ = load_training_state(cfg_.resume_dir, opt_);
    std::istringstream in(state_.rng);
    in >> rng_;
    check(!in.fail(), cfg_.resume_dir, "/train_state.json: unreadable RNG state");
    const std::vector<int64_t> moe = moe_layers(hp_);
    check(state_.biases.size() == moe.size(), cfg_.resume_dir,
          "/train_state.json: ", state_.biases.size(), " router biases for ", moe.size(),
          " MoE layers");
    for (size_t i = 0; i < moe.size(); ++i) bal_.layer(moe[i]).set_bias(state_.biases[i]);
  }

  void save() {
    std::ostringstream rng;
    rng << rng_;
    state_.rng = rng.str();
    state_.biases.clear();
    for (int64_t l : moe_layers(hp_)) state_.biases.push_back(bal_.layer(l).bias());
    save_training_checkpoint(cfg_.out_dir, src_, tok_dir_, params_, opt_, state_, cfg_.on_save);
  }

  TrainConfig cfg_;
  std::string src_, tok_dir_;
  std::unique_ptr<Checkpoint> ckpt_;
  HParams hp_;
  ParamSet params_, grads_;
  Optimizer opt_;
  ModelBalancer bal_;
  WindowBatch batch_;
  std::unique_ptr<GpuBatch> gpu_;  // --device cuda
  std::mt19937_64 rng_;
  TokenStream data_, val_;
  LrSchedule sched_;
  TrainState state_;
  double pass_seconds_ = 0, update_seconds_ = 0;  // this call's steps (TrainResult)
};

}  // namespace

TrainResult train_model(const TrainConfig& config) {
  validate(config);
  if (config.threads > 0) set_num_threads(config.threads);
  Trainer t(config);
  return t.run();
}

}  // namespace k3
