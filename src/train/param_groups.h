// Which optimiser updates each parameter tensor (spec §8), decided by its weight-table slot:
//   Muon     2-D weight matrices of the blocks: attention projections, FFN and expert matrices,
//            the LatentMoE latent projections, the KDA decay and beta projections.
//   per-head Muon (option) the attention projections are orthogonalised one head block at a
//            time: KDA q/k/v/f_b/g and MLA q_b/kv_b/g split on the output axis (rows), both
//            o_proj on the input axis (columns).
//   AdamW    embeddings and the LM head, every norm, the router weight (a gate), conv taps,
//            A_log, dt_bias, AttnRes projections: everything that is not a hidden matrix.
//   frozen   the router's selection bias: no gradient, it is set by router balancing (§7).
// Weight decay applies to matrices (Muon, and AdamW tensors with two axes longer than one: the
// embeddings, LM head, router and conv taps), not to vectors.
#pragma once

#include <cstdint>
#include <string>

#include "k3/hparams.h"
#include "k3/weight_table.h"

namespace k3::train {

enum class Update : uint8_t { muon, adamw, frozen };
enum class HeadAxis : uint8_t { none, rows, cols };

struct ParamGroup {
  Update update = Update::adamw;
  HeadAxis head_axis = HeadAxis::none;  // per-head Muon: which axis holds the head blocks
  int64_t heads = 1;                    // number of head blocks along head_axis
  bool decay = false;                   // decoupled weight decay
};

ParamGroup param_group(const WeightEntry& w, const HParams& hp, bool per_head_muon);
// The same, by checkpoint tensor name ("<base>.weight" also names an MXFP4 "<base>.weight_packed");
// throws k3::Error for a name the config does not have.
ParamGroup param_group(const std::string& name, const HParams& hp, bool per_head_muon);
const char* update_name(Update u);

}  // namespace k3::train
