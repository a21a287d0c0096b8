// The registry ops the training path differentiates: each must have a `bwd` launcher and
// gradient-check cases (tests/ops checks both). mla_absorbed is the decode form; training
// runs the expanded MLA, whose maths it shares.
#pragma once

namespace k3 {

inline constexpr const char* kTrainingOps[] = {
    "linear",
    "rms_norm",
    "gated_rms_norm",
    "l2_norm",
    "conv1d_silu",
    "kda_recurrent",
    "kda_chunked",
    "kda_gate",
    "mla_expanded",
    "attn_res_mix",
    "router",
    "situ_glu",
    "sigmoid",
    "scale",
    "add",
    "mul_sigmoid",
    "copy",
    "gather_rows",
    "gather_choice_rows",
    "moe_scatter_add",
    "cross_entropy",
};

}  // namespace k3
