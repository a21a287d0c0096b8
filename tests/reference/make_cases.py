#!/usr/bin/env python3
"""Write the seeded, deterministic tiny K3 golden cases under tests/data/models/.

Each case is a random-weight K3 checkpoint in the exact official layout (k3-spec.md §1, §9):

* top-level ``config.json`` (``KimiK3ForConditionalGeneration`` / ``kimi_k3`` wrapper with
  ``text_config`` and its ``linear_attn_config``, a ``vision_config`` stub, and a top-level
  ``quantization_config`` when the routed experts are MXFP4);
* ``model.safetensors.index.json`` (``metadata.total_size`` = bytes of tensor data,
  ``weight_map``) and shards ``model-00001-of-000002.safetensors`` (5-digit index, 6-digit total);
* tensors under ``language_model.model.*`` and ``language_model.lm_head.weight``; BF16 for
  linear and norm weights, F32 for conv taps, ``A_log`` (padded to head_dim with zeros),
  ``dt_bias``, ``o_norm`` and ``e_score_correction_bias``; U8 ``weight_packed`` /
  ``weight_scale`` for MXFP4 experts (low nibble = even element, E8M0 scales);
* tensor order shuffled inside each shard, the tensors of one expert back to back, experts not
  in id order (as in the release, §9.1).

Next to each checkpoint it writes, from tests/reference/k3_ref.py (float64):

* ``tokens.json``: the prompt ids;
* ``logits_prefill.npy``: float32 [T, vocab], one pass (chunked KDA, expanded MLA);
* ``logits_decode.npy``: float32 [T, vocab], token by token (recurrent KDA, absorbed MLA);
* ``greedy.json``: 16 greedy tokens after the prompt (prefill, then decode steps), with the
  top1 − top2 logit gap of each step.

and ``tests/data/models/MANIFEST.json`` describing every case.

Usage: ``python3 tests/reference/make_cases.py [--out DIR] [--only NAME ...]``.
Only numpy, json and struct are needed. The checkpoint bytes depend only on the seeds; the
logits are reproducible to float64 rounding (~1e-15 relative), far below float32 storage.
"""

import argparse
import json
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import k3_ref as R  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_OUT = os.path.join(REPO, "tests", "data", "models")
N_GREEDY = 16

# Init knobs (std multipliers; a linear layer W[out, in] gets std = scale / sqrt(in)).
INIT = dict(
    out_scale=0.4,        # o_proj (KDA, MLA), mlp/shared down_proj, routed_expert_up_proj
    res_proj_scale=1.0,   # AttnRes pseudo-queries *_res_proj
    lm_head_scale=1.5,
    dt_lo=-4.0, dt_hi=1.0,  # dt_bias ~ U(dt_lo, dt_hi)
)

# ------------------------------------------------------------------------------------------------
# The cases. Every field not listed takes the value in BASE. Layer lists are 1-based (as in the
# config); "mla" lists the full-attention layers, every other layer is KDA.
# ------------------------------------------------------------------------------------------------

BASE = dict(
    vocab=256, hidden=32, layers=4, mla=[4],
    kda_heads=2, kda_head_dim=16,
    mla_heads=2, nope=16, rope=8, v=16, q_lora=24, kv_lora=16,
    intermediate=64, experts=4, top_k=2, shared=1, moe_inter=32, latent=32,
    rsf=1.0, first_dense=1, block=2, mxfp4=False, shards=1, T=20,
    # std multiplier of q_a_proj / kv_a_proj_with_mqa (see lora_scale in the README): a small
    # value makes the LoRA-norm inputs small, so that using eps 1e-5 instead of 1e-6 there
    # visibly changes the logits.
    lora_scale=1.0,
    # std multiplier of the routed experts' w2 (bf16), or 2^round(log2(.)) on its E8M0 scales
    # (MXFP4): a small value makes the routed combine small, so that routed_expert_norm's
    # epsilon (rms_norm_eps = 1e-5) matters.
    w2_scale=1.0,
)

CASES = [
    dict(name="c1_tiny", seed=1001,
         desc="hidden 32, 4 layers KKKM, bf16 experts (4, top-2, 1 shared), AttnRes block 2, 20-token prompt",
         hidden=32, layers=4, mla=[4], block=2, T=20, lora_scale=1.0),
    dict(name="c2_13layer", seed=1002,
         desc="13 layers with the release's 3:1 schedule and MLA tail (1-based 4,8,12,13), AttnRes "
              "block 4 (slots sealed at 0,4,8,12), MXFP4 experts, 2 shards, 150-token prompt "
              "(> 2 KDA chunks, not a multiple of 64), small LoRA-norm inputs",
         vocab=384, hidden=32, layers=13, mla=[4, 8, 12, 13], block=4, mxfp4=True, shards=2,
         kda_heads=2, kda_head_dim=16, mla_heads=2, nope=16, rope=8, v=16, q_lora=24, kv_lora=16,
         intermediate=64, experts=4, top_k=2, moe_inter=32, latent=32, T=150, lora_scale=0.03),
    dict(name="c3_mxfp4_top1", seed=1003,
         desc="MXFP4 experts, top-1 routing (raw sigmoid score, no renormalisation), "
              "routed_scaling_factor 2.5, KDA 4x16 vs MLA 2 heads (nope 8, rope 8, v 12), "
              "schedule KMKKMM, 64-token prompt (exactly one KDA chunk), small LoRA-norm inputs, "
              "small routed combine (eps of routed_expert_norm, the raw top-1 weight and the "
              "scaling factor all visible)",
         vocab=320, hidden=48, layers=6, mla=[2, 5, 6], block=3, mxfp4=True,
         kda_heads=4, kda_head_dim=16, mla_heads=2, nope=8, rope=8, v=12, q_lora=16, kv_lora=16,
         intermediate=80, experts=8, top_k=1, shared=1, moe_inter=32, latent=32, rsf=2.5,
         T=64, lora_scale=0.02, w2_scale=2.0 ** -7),
    dict(name="c4_dense3_kall", seed=1004,
         desc="first_k_dense_replace 3, k = N (4 of 4 experts), routed_scaling_factor 1.5, "
              "6 layers KKKMKM, bf16 experts, 2 shared experts, 129-token prompt, small routed "
              "combine (routed_scaling_factor visible through routed_expert_norm's eps)",
         vocab=300, hidden=40, layers=6, mla=[4, 6], block=2,
         kda_heads=2, kda_head_dim=20, mla_heads=4, nope=8, rope=4, v=10, q_lora=20, kv_lora=12,
         intermediate=48, experts=4, top_k=4, shared=2, moe_inter=16, latent=24, rsf=1.5,
         first_dense=3, T=129, lora_scale=0.05, w2_scale=2.0 ** -7),
    dict(name="c5_wide", seed=1005,
         desc="hidden 128, KDA 4x32, MLA 4 heads (nope 32, rope 16, v 32, q_lora 64, kv_lora 48), "
              "8 MXFP4 experts top-2, 2 shared, 5 layers KMKMM, AttnRes block 1 (a seal at every "
              "layer: 5 slots + P in the output mix), 70-token prompt",
         vocab=256, hidden=128, layers=5, mla=[2, 4, 5], block=1, mxfp4=True,
         kda_heads=4, kda_head_dim=32, mla_heads=4, nope=32, rope=16, v=32, q_lora=64, kv_lora=48,
         intermediate=32, experts=8, top_k=2, shared=2, moe_inter=32, latent=32, T=70,
         lora_scale=0.1),
    dict(name="c6_one_token", seed=1006,
         desc="1-token prompt; 3 layers MKM (MLA at layer 0), dense layer 0, bf16 experts "
              "(3, top-2), AttnRes block 2, small LoRA-norm inputs",
         vocab=256, hidden=32, layers=3, mla=[1, 3], block=2,
         kda_heads=2, kda_head_dim=8, mla_heads=3, nope=8, rope=8, v=8, q_lora=16, kv_lora=16,
         intermediate=48, experts=3, top_k=2, shared=1, moe_inter=16, latent=16, T=1,
         lora_scale=0.03),
]

# ------------------------------------------------------------------------------------------------
# Encoding helpers
# ------------------------------------------------------------------------------------------------


def to_bf16_bits(x):
    """float64 -> bf16 bit patterns (uint16), round to nearest even (via float32)."""
    f = np.asarray(x, dtype=np.float32)
    b = f.view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    return b.astype(np.uint16)


class Tensor:
    """One stored tensor: dtype string ('BF16', 'F32', 'U8'), shape and raw bytes."""

    def __init__(self, dtype, shape, data):
        self.dtype, self.shape, self.data = dtype, list(shape), data


def bf16(x):
    x = np.asarray(x)
    return Tensor("BF16", x.shape, to_bf16_bits(x).astype("<u2").tobytes())


def f32(x):
    x = np.asarray(x)
    return Tensor("F32", x.shape, x.astype("<f4").tobytes())


def u8(x):
    x = np.asarray(x, dtype=np.uint8)
    return Tensor("U8", x.shape, x.tobytes())


def write_safetensors(path, items):
    """items: list of (name, Tensor) in file order. Header padded with spaces to 8 bytes."""
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name, t in items:
        header[name] = {"dtype": t.dtype, "shape": t.shape, "data_offsets": [off, off + len(t.data)]}
        off += len(t.data)
    hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hb += b" " * ((-len(hb)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for _, t in items:
            f.write(t.data)


# ------------------------------------------------------------------------------------------------
# Random init (see README.md "Random init")
# ------------------------------------------------------------------------------------------------


class Init:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def linear(self, out_f, in_f, scale=1.0):
        """W [out, in] ~ N(0, (scale / sqrt(in))²), stored BF16."""
        return bf16(self.rng.standard_normal((out_f, in_f)) * (scale / np.sqrt(in_f)))

    def norm(self, n):
        """norm weight ~ 1 + 0.1·N(0,1), stored BF16."""
        return bf16(1.0 + 0.1 * self.rng.standard_normal(n))

    def attn_res_proj(self, d):
        """AttnRes pseudo-query [1, d] ~ N(0, (2/sqrt(d))²): depth scores spread by ~2 units."""
        return bf16(self.rng.standard_normal((1, d)) * (INIT["res_proj_scale"] / np.sqrt(d)))

    def mxfp4(self, out_f, in_f, scale=1.0):
        """Random MXFP4 weight [out, in]: uniformly random nibbles (all 16 codes, -0 included);
        per-32-group E8M0 exponent 127 + e0 + j with e0 = -ceil(log2(sqrt(in))) - 1 and
        j uniform in {-1, 0, 1}. E2M1 codes have RMS ~2.93, so the weight RMS is ~1/sqrt(in)."""
        assert in_f % 32 == 0, "MXFP4 needs in_features % 32 == 0"
        nib = self.rng.integers(0, 16, size=(out_f, in_f), dtype=np.uint8)
        packed = (nib[:, 0::2] | (nib[:, 1::2] << 4)).astype(np.uint8)   # low nibble = even
        e0 = -int(np.ceil(np.log2(np.sqrt(in_f)))) - 1 + int(round(np.log2(scale)))
        scale = (127 + e0 + self.rng.integers(-1, 2, size=(out_f, in_f // 32))).astype(np.uint8)
        return u8(packed), u8(scale)


def build_case(c):
    """Return (top-level config dict, ordered list of units); a unit is a list of (name, Tensor)
    that must stay together in a shard (an expert's tensors), with a layer tag for sharding."""
    rnd = Init(c["seed"])
    d, V, nL = c["hidden"], c["vocab"], c["layers"]
    H, K = c["kda_heads"], c["kda_head_dim"]
    assert K >= H, "A_log is stored padded to head_dim entries, so head_dim >= num_heads"
    Hm = c["mla_heads"]
    mla_1b = list(c["mla"])
    kda_1b = [i for i in range(1, nL + 1) if i not in mla_1b]
    units = []          # (layer tag or -1, [(name, Tensor), ...])
    P = "language_model.model."

    def add(tag, name, t):
        units.append((tag, [(name, t)]))

    add(-1, P + "embed_tokens.weight", bf16(rnd.rng.standard_normal((V, d))))   # N(0,1) rows
    add(-1, P + "norm.weight", rnd.norm(d))
    add(-1, P + "output_attn_res_norm.weight", rnd.norm(d))
    add(-1, P + "output_attn_res_proj.weight", rnd.attn_res_proj(d))
    add(-1, "language_model.lm_head.weight", rnd.linear(V, d, scale=INIT["lm_head_scale"]))
    for l in range(nL):
        L = P + f"layers.{l}."
        for nm in ("input_layernorm", "post_attention_layernorm", "self_attention_res_norm",
                   "mlp_res_norm"):
            add(l, L + nm + ".weight", rnd.norm(d))
        add(l, L + "self_attention_res_proj.weight", rnd.attn_res_proj(d))
        add(l, L + "mlp_res_proj.weight", rnd.attn_res_proj(d))
        A = L + "self_attn."
        if (l + 1) in kda_1b:
            HK = H * K
            for nm in ("q", "k", "v"):
                add(l, A + f"{nm}_proj.weight", rnd.linear(HK, d))
                # conv taps F32 [HK, 1, 4] ~ N(0, 0.5²)
                add(l, A + f"{nm}_conv1d.weight", f32(0.5 * rnd.rng.standard_normal((HK, 1, 4))))
            add(l, A + "f_a_proj.weight", rnd.linear(K, d))           # rank = head_dim
            add(l, A + "f_b_proj.weight", rnd.linear(HK, K))
            # A_log F32 [K]: first H entries with exp(A) uniform in [0.6, 2.7]; the rest 0.
            alog = np.zeros(K)
            alog[:H] = np.log(rnd.rng.uniform(0.6, 2.7, size=H))
            add(l, A + "A_log", f32(alog))
            # dt_bias F32 [HK] ~ U(-3, 0): per-channel decay from fast to slow memory.
            add(l, A + "dt_bias", f32(rnd.rng.uniform(INIT["dt_lo"], INIT["dt_hi"], size=HK)))
            add(l, A + "b_proj.weight", rnd.linear(H, d))
            add(l, A + "g_proj.weight", rnd.linear(HK, d))
            add(l, A + "o_norm.weight", f32(1.0 + 0.1 * rnd.rng.standard_normal(K)))
            add(l, A + "o_proj.weight", rnd.linear(d, HK, scale=INIT["out_scale"]))
        else:
            nope, rope, vd = c["nope"], c["rope"], c["v"]
            add(l, A + "q_a_proj.weight", rnd.linear(c["q_lora"], d, scale=c["lora_scale"]))
            add(l, A + "q_a_layernorm.weight", rnd.norm(c["q_lora"]))
            add(l, A + "q_b_proj.weight", rnd.linear(Hm * (nope + rope), c["q_lora"]))
            add(l, A + "kv_a_proj_with_mqa.weight",
                rnd.linear(c["kv_lora"] + rope, d, scale=c["lora_scale"]))
            add(l, A + "kv_a_layernorm.weight", rnd.norm(c["kv_lora"]))
            add(l, A + "kv_b_proj.weight", rnd.linear(Hm * (nope + vd), c["kv_lora"]))
            add(l, A + "g_proj.weight", rnd.linear(Hm * vd, d))
            add(l, A + "o_proj.weight", rnd.linear(d, Hm * vd, scale=INIT["out_scale"]))
        if l < c["first_dense"]:
            F = L + "mlp."
            add(l, F + "gate_proj.weight", rnd.linear(c["intermediate"], d))
            add(l, F + "up_proj.weight", rnd.linear(c["intermediate"], d))
            add(l, F + "down_proj.weight", rnd.linear(d, c["intermediate"], scale=INIT["out_scale"]))
        else:
            M = L + "block_sparse_moe."
            E, I, Lt = c["experts"], c["moe_inter"], c["latent"]
            add(l, M + "gate.weight", rnd.linear(E, d))
            # selection bias F32 [E] ~ N(0, 0.1²): big enough to change some selections
            add(l, M + "gate.e_score_correction_bias", f32(0.1 * rnd.rng.standard_normal(E)))
            add(l, M + "routed_expert_down_proj.weight", rnd.linear(Lt, d))
            add(l, M + "routed_expert_norm.weight", rnd.norm(Lt))
            add(l, M + "routed_expert_up_proj.weight", rnd.linear(d, Lt, scale=INIT["out_scale"]))
            S = c["shared"] * I
            if c["shared"] > 0:
                add(l, M + "shared_experts.gate_proj.weight", rnd.linear(S, d))
                add(l, M + "shared_experts.up_proj.weight", rnd.linear(S, d))
                add(l, M + "shared_experts.down_proj.weight", rnd.linear(d, S, scale=INIT["out_scale"]))
            for e in range(E):
                ex = []
                for wn, (o, i) in (("w1", (I, Lt)), ("w2", (Lt, I)), ("w3", (I, Lt))):
                    sc_mul = c["w2_scale"] if wn == "w2" else 1.0
                    if c["mxfp4"]:
                        pk, sc = rnd.mxfp4(o, i, sc_mul)
                        ex += [(M + f"experts.{e}.{wn}.weight_packed", pk),
                               (M + f"experts.{e}.{wn}.weight_scale", sc)]
                    else:
                        ex.append((M + f"experts.{e}.{wn}.weight", rnd.linear(o, i, sc_mul)))
                units.append((l, ex))
    cfg = make_config(c, kda_1b, mla_1b)
    return cfg, units, rnd


def make_config(c, kda_1b, mla_1b):
    V = c["vocab"]
    ids = dict(bos_token_id=V - 128, eos_token_id=V - 126, pad_token_id=V - 1)
    text = {
        "model_type": "kimi_linear",
        "architectures": ["KimiLinearForCausalLM"],
        "vocab_size": V,
        "hidden_size": c["hidden"],
        "intermediate_size": c["intermediate"],
        "num_hidden_layers": c["layers"],
        "num_attention_heads": c["mla_heads"],
        "num_key_value_heads": c["mla_heads"],
        "hidden_act": "situ",
        "activation_situ_beta": 4.0,
        "activation_situ_linear_beta": 25.0,
        "rms_norm_eps": 1e-05,
        "tie_word_embeddings": False,
        "max_position_embeddings": 1048576,
        "q_lora_rank": c["q_lora"],
        "kv_lora_rank": c["kv_lora"],
        "qk_nope_head_dim": c["nope"],
        "qk_rope_head_dim": c["rope"],
        "v_head_dim": c["v"],
        "mla_use_nope": True,
        "mla_use_output_gate": True,
        "num_experts": c["experts"],
        "num_experts_per_token": c["top_k"],
        "num_shared_experts": c["shared"],
        "moe_intermediate_size": c["moe_inter"],
        "routed_expert_hidden_size": c["latent"],
        "latent_moe_use_norm": True,
        "moe_router_activation_func": "sigmoid",
        "moe_renormalize": True,
        "routed_scaling_factor": c["rsf"],
        "use_grouped_topk": True,
        "num_expert_group": 1,
        "topk_group": 1,
        "topk_method": "noaux_tc",
        "first_k_dense_replace": c["first_dense"],
        "moe_layer_freq": 1,
        "num_nextn_predict_layers": 0,
        "attn_res_block_size": c["block"],
        "linear_attn_config": {
            "num_heads": c["kda_heads"],
            "head_dim": c["kda_head_dim"],
            "short_conv_kernel_size": 4,
            "gate_lower_bound": -5.0,
            "use_full_rank_gate": True,
            "full_attn_layers": mla_1b,
            "kda_layers": kda_1b,
        },
        "torch_dtype": "bfloat16",
        **ids,
    }
    top = {
        "architectures": ["KimiK3ForConditionalGeneration"],
        "model_type": "kimi_k3",
        **ids,
        "media_placeholder_token_id": V - 107,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "text_config": text,
        "vision_config": {
            "model_type": "moonvit", "num_hidden_layers": 27, "hidden_size": 1024,
            "num_attention_heads": 12, "intermediate_size": 4096, "patch_size": 14,
            "merge_kernel_size": [2, 2],
        },
    }
    if c["mxfp4"]:
        top["quantization_config"] = {
            "quant_method": "compressed-tensors",
            "format": "mxfp4-pack-quantized",
            "quantization_status": "compressed",
            "config_groups": {
                "group_0": {
                    "targets": ["Linear"],
                    "format": "mxfp4-pack-quantized",
                    "weights": {
                        "num_bits": 4, "type": "float", "group_size": 32, "strategy": "group",
                        "symmetric": True, "dynamic": False, "observer": "minmax",
                        "scale_dtype": "torch.uint8",
                    },
                    "input_activations": None,
                    "output_activations": None,
                }
            },
            "ignore": [".*self_attn.*", ".*shared_experts.*", ".*mlp\\.(gate|up|gate_up|down)_proj.*",
                       ".*lm_head.*", ".*vision_tower.*", ".*mm_projector.*"],
        }
    return top


def write_checkpoint(c, out_dir):
    cfg, units, rnd = build_case(c)
    os.makedirs(out_dir, exist_ok=True)
    for f in os.listdir(out_dir):                      # start clean (old shard counts etc.)
        os.remove(os.path.join(out_dir, f))
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    # Shard assignment: model-level tensors (-1) go to the first shard together with the first
    # layers; layers are split into contiguous ranges of about equal size.
    n_sh, nL = c["shards"], c["layers"]
    shard_of_layer = [min(n_sh - 1, (l * n_sh) // nL) for l in range(nL)]
    per_shard = [[] for _ in range(n_sh)]
    for tag, items in units:
        per_shard[0 if tag < 0 else shard_of_layer[tag]].append(items)
    weight_map, total = {}, 0
    for s in range(n_sh):
        fname = f"model-{s + 1:05d}-of-{n_sh:06d}.safetensors"
        order = rnd.rng.permutation(len(per_shard[s]))   # shuffle units (experts stay together)
        items = [it for i in order for it in per_shard[s][i]]
        write_safetensors(os.path.join(out_dir, fname), items)
        for name, t in items:
            weight_map[name] = fname
            total += len(t.data)
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total},
                   "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
        f.write("\n")
    prompt = rnd.rng.integers(0, c["vocab"], size=c["T"]).tolist()
    return prompt


def greedy(m, prompt, n):
    """Prefill the prompt, then n decode steps feeding back the argmax."""
    st = R.new_state(m)
    logits = R.forward(m, prompt, st, "prefill")[-1]
    toks, gaps = [], []
    for _ in range(n):
        top2 = np.sort(logits)[-2:]
        t = int(np.argmax(logits))
        toks.append(t)
        gaps.append(round(float(top2[1] - top2[0]), 6))
        logits = R.forward(m, [t], st, "decode")[0]
    return toks, gaps


def eps_sensitivity(m, prompt, ref):
    """Relative L2 change of the prefill logits if the MLA LoRA norms used 1e-5 instead of 1e-6."""
    saved = R.MLA_LORA_EPS
    try:
        R.MLA_LORA_EPS = 1e-5
        alt = R.forward_prefill(m, prompt)
    finally:
        R.MLA_LORA_EPS = saved
    return float(R.rel_l2_rows(alt, ref).max())


def rms_eps_sensitivity(m, prompt, ref):
    """Relative L2 change if every rms_norm_eps norm (not the LoRA norms) used 1e-6 instead."""
    saved = m.eps
    try:
        m.eps = 1e-6
        alt = R.forward_prefill(m, prompt)
    finally:
        m.eps = saved
    return float(R.rel_l2_rows(alt, ref).max())


def rsf_sensitivity(m, prompt, ref):
    """Relative L2 change if routed_scaling_factor were ignored (taken as 1)."""
    saved = m.cfg["routed_scaling_factor"]
    try:
        m.cfg["routed_scaling_factor"] = 1.0
        alt = R.forward_prefill(m, prompt)
    finally:
        m.cfg["routed_scaling_factor"] = saved
    return float(R.rel_l2_rows(alt, ref).max())


def fp32_agreement(out_dir, prompt, ref):
    """Max relative L2 per position of an fp32 run of the same reference (prefill, decode)."""
    m32 = R.load(out_dir, np.float32)
    lp = R.forward_prefill(m32, prompt)
    ld = R.forward_decode(m32, prompt)
    ok = bool((lp.argmax(-1) == ref.argmax(-1)).all() and (ld.argmax(-1) == ref.argmax(-1)).all())
    return float(R.rel_l2_rows(lp, ref).max()), float(R.rel_l2_rows(ld, ref).max()), ok


def top1_renorm_sensitivity(m, prompt, ref):
    """Relative L2 change if top-1 routing renormalised the weight to 1 (the llama.cpp rule)."""
    real_router = R.router

    def router_renorm(mm, l, x):
        dense, sel = real_router(mm, l, x)
        dense = (dense != 0) * mm.cfg.get("routed_scaling_factor", 1.0)
        return dense, sel

    try:
        R.router = router_renorm
        alt = R.forward_prefill(m, prompt)
    finally:
        R.router = real_router
    return float(R.rel_l2_rows(alt, ref).max())


def router_min_margin(m, trace):
    """Smallest gap, over all MoE layers and prompt tokens, between the k-th and (k+1)-th
    biased router score (None when k = N): how far every selection is from a tie."""
    k, E = m.cfg["num_experts_per_token"], m.cfg["num_experts"]
    if k >= E:
        return None
    best = np.inf
    for l, kind in enumerate(m.ffn_kind):
        if kind != "moe":
            continue
        b = m.w[m.layer(l) + "block_sparse_moe.gate.e_score_correction_bias"]
        biased = np.sort(R.sigmoid(trace[f"layers.{l}.moe.router_logits"]) + b, axis=-1)[:, ::-1]
        best = min(best, float(np.min(biased[:, k - 1] - biased[:, k])))
    return best


def make_case(c, out_root):
    c = {**BASE, **c}
    out_dir = os.path.join(out_root, c["name"])
    prompt = write_checkpoint(c, out_dir)
    m = R.load(out_dir)
    trace = {}
    lp = R.forward_prefill(m, prompt, trace)
    ld = R.forward_decode(m, prompt)
    with open(os.path.join(out_dir, "tokens.json"), "w") as f:
        json.dump(prompt, f)
        f.write("\n")
    np.save(os.path.join(out_dir, "logits_prefill.npy"), lp.astype(np.float32))
    np.save(os.path.join(out_dir, "logits_decode.npy"), ld.astype(np.float32))
    toks, gaps = greedy(m, prompt, N_GREEDY)
    with open(os.path.join(out_dir, "greedy.json"), "w") as f:
        json.dump({"prompt_len": len(prompt), "n_new": N_GREEDY, "continuation": toks,
                   "top1_minus_top2": gaps}, f, indent=1)
        f.write("\n")
    margin = router_min_margin(m, trace)
    srt = np.sort(lp, axis=-1)
    gap = srt[:, -1] - srt[:, -2]
    attn, ffn = m.schedule()
    nbytes = sum(os.path.getsize(os.path.join(out_dir, f)) for f in os.listdir(out_dir))
    n_slots = len([l for l in range(c["layers"]) if l % c["block"] == 0])
    info = {
        "description": c["desc"],
        "seed": c["seed"],
        "prompt_len": c["T"],
        "vocab_size": c["vocab"],
        "hidden_size": c["hidden"],
        "num_layers": c["layers"],
        "attn_schedule": f"{attn}  (K=KDA, M=MLA, 0-based left to right)",
        "ffn_schedule": f"{ffn}  (D=dense, E=LatentMoE)",
        "kda": f"{c['kda_heads']} heads x {c['kda_head_dim']}",
        "mla": (f"{c['mla_heads']} heads, nope {c['nope']}, rope {c['rope']}, v {c['v']}, "
                f"q_lora {c['q_lora']}, kv_lora {c['kv_lora']}"),
        "moe": (f"{c['experts']} experts top-{c['top_k']}, {c['shared']} shared, width "
                f"{c['moe_inter']}, latent {c['latent']}, routed_scaling_factor {c['rsf']}, "
                f"{'MXFP4' if c['mxfp4'] else 'BF16'} experts"),
        "first_k_dense_replace": c["first_dense"],
        "attn_res_block_size": c["block"],
        "attn_res_slots": n_slots,
        "shards": c["shards"],
        "total_bytes": nbytes,
        "prefill_vs_decode_max_rel_l2": float(R.rel_l2_rows(lp, ld).max()),
        "argmax_prefill_eq_decode": bool((lp.argmax(-1) == ld.argmax(-1)).all()),
        "logit_std": float(lp.std()),
        "top1_minus_top2_min": float(gap.min()),
        "top1_minus_top2_median": float(np.median(gap)),
        "router_min_margin": margin,
    }
    f32p, f32d, f32ok = fp32_agreement(out_dir, prompt, lp)
    info["fp32_ref_prefill_max_rel_l2"] = f32p
    info["fp32_ref_decode_max_rel_l2"] = f32d
    info["fp32_ref_argmax_all_equal"] = f32ok
    info["sensitivity_max_rel_l2"] = {
        "mla_lora_norm_eps_1e-5_instead_of_1e-6":
            eps_sensitivity(m, prompt, lp) if "M" in attn else None,
        "rms_norm_eps_1e-6_instead_of_1e-5": rms_eps_sensitivity(m, prompt, lp),
    }
    if c["rsf"] != 1.0:
        info["sensitivity_max_rel_l2"]["routed_scaling_factor_ignored"] = \
            rsf_sensitivity(m, prompt, lp)
    if c["top_k"] == 1:
        info["sensitivity_max_rel_l2"]["top1_weight_renormalised_to_1"] = \
            top1_renorm_sensitivity(m, prompt, lp)
    return c["name"], info


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--only", nargs="*", help="case names to (re)write; the manifest is merged")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    man_path = os.path.join(args.out, "MANIFEST.json")
    manifest = {}
    if args.only and os.path.exists(man_path):
        with open(man_path) as f:
            manifest = json.load(f)
    for c in CASES:
        if args.only and c["name"] not in args.only:
            continue
        name, info = make_case(c, args.out)
        manifest[name] = info
        print(f"{name}: {info['attn_schedule'].split()[0]} {info['ffn_schedule'].split()[0]} "
              f"T={info['prompt_len']} bytes={info['total_bytes']} "
              f"prefill~decode={info['prefill_vs_decode_max_rel_l2']:.2e} "
              f"gap min/med={info['top1_minus_top2_min']:.3f}/{info['top1_minus_top2_median']:.3f} "
              f"fp32={info['fp32_ref_prefill_max_rel_l2']:.1e}/{info['fp32_ref_decode_max_rel_l2']:.1e} "
              f"sens={info['sensitivity_max_rel_l2']}")
    manifest = {k: manifest[k] for k in sorted(manifest)}
    with open(man_path, "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
