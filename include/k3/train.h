// Training a K3-architecture model from a checkpoint (`k3 train`): text files tokenised with
// the model's tokenizer, random windows of seq_len + 1 tokens, the fp32 training forward and
// backward (loss_and_grads), gradient accumulation, clipping, Muon/AdamW with a warmup +
// cosine/WSD schedule, router-bias balancing after each step, held-out evaluation, and
// checkpoints in the official layout that every other command loads. A checkpoint also holds
// the optimiser moments, the step and the sampler's RNG, so a resumed run is bit-exact with
// one that never stopped (same flags and threads).
//
//   k3::TrainConfig cfg;
//   cfg.model_dir = "/tmp/init";  cfg.data_files = {"data/train.txt"};  cfg.out_dir = "/tmp/out";
//   k3::TrainResult r = k3::train_model(cfg);   // throws k3::Error naming what is wrong
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace k3 {

// One logged optimiser step (val_* are NaN on steps without an evaluation).
struct TrainPoint {
  int64_t step = 0;  // 1-based: the number of updates done
  double loss = 0, lr = 0, max_vio = 0, grad_norm = 0, tokens_per_s = 0;
  double val_loss = std::numeric_limits<double>::quiet_NaN();
  double val_bpb = std::numeric_limits<double>::quiet_NaN();
};

struct TrainConfig {
  std::string model_dir;      // initial checkpoint (official layout, with a tokenizer)
  std::string resume_dir;     // or: a checkpoint written by train_model, continued bit-exactly
  std::string tokenizer_dir;  // where tiktoken.model is, when not in the checkpoint
  std::vector<std::string> data_files;
  std::string val_file;  // optional held-out text
  std::string out_dir;   // the checkpoint written at the end (and every save_every steps)
  int64_t seq_len = 128, micro_batch = 1, accumulation = 1;
  int64_t steps = 100;     // the schedule's total
  int64_t stop_after = 0;  // > 0: stop (and save) after this many steps, to resume later
  double lr = 3e-3, min_lr_ratio = 0.1, clip = 1.0, weight_decay = 0.1;
  double mtp_weight = 0.3;  // λ of the MTP head's loss (num_nextn_predict_layers = 1)
  int64_t warmup = 0;
  std::string schedule = "cosine";  // constant | cosine | wsd
  std::string optimizer = "muon";   // muon (hidden matrices; AdamW for the rest) | adamw
  std::string balance = "qb";       // qb | qb-exact | lossfree | none
  int threads = 0;                  // 0: leave the engine's default
  // Where the forward and backward run: cpu, or cuda (the windows of a micro-batch at once on
  // the GPU; the optimiser and balancer stay on the host).
  std::string device = "cpu";
  uint64_t seed = 0;
  int64_t eval_every = 0, eval_windows = 8, save_every = 0, log_every = 1;
  std::function<void(const std::string&)> log;  // one progress line (no newline)
  // Called with the temporary checkpoint directory before it is renamed into place, so files
  // written here (e.g. a training-curve SVG) are part of the atomic checkpoint.
  std::function<void(const std::string& dir, const std::vector<TrainPoint>&)> on_save;
};

struct TrainResult {
  std::vector<TrainPoint> history;  // every step since the run began (resumes included)
  double tokens_per_s = 0;          // training tokens / wall time of this call's steps
  // Where this call's step time went (seconds): the forward and backward passes (windows
  // drawn, gradients summed), and the update (scaling, clipping, optimiser, router balancing).
  double pass_seconds = 0, update_seconds = 0;
};

TrainResult train_model(const TrainConfig& config);

}  // namespace k3
