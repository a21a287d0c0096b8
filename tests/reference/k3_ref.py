#!/usr/bin/env python3
"""Independent float64 NumPy reference of the Kimi K3 text model (k3-spec.md §0-§6, §9).

This is the slow, obvious oracle for the k3.cpp engine's whole-model golden tests. It follows the
spec's *maths*, not its bf16 rounding points: weights are read from the checkpoint exactly (BF16
widened to float64, MXFP4 dequantized exactly, §9.3) and every activation stays in float64. The
only dependencies are numpy, json and struct, so it runs anywhere.

Two independent code paths compute the same function:

* ``forward_prefill``: the whole prompt in one pass. KDA uses the chunkwise-parallel form
  (chunk 64, §3.8); MLA uses the expanded multi-head form (§4.2).
* ``forward_decode``: one token at a time from an empty state. KDA uses the token-by-token
  recurrence (§3.6) with a carried conv state and recurrent state; MLA uses the absorbed
  latent-cache form (§4.3).

In float64 the two agree to ~1e-13 relative L2, which checks each against the other.

``--round-bf16`` (``set_round_bf16(model, True)``) emulates the engine's bf16 precision mode
instead: the input of every matmul whose weight is stored BF16 or MXFP4 is rounded to bf16
(through fp32, round to nearest even) and the product taken in float64. The MoE router keeps its
input exact (the engine runs it in fp32), as does every non-matmul step. MLA rounds where the
engine's matmuls are: the latent before W_UK / W_UV in the expanded prefill form, the query
before W_UKᵀ and the attention output ō before W_UV in the absorbed form. The engine's bf16
mode then differs from this only by its fp32 arithmetic, so its kernels are held tightly
whatever the model's sensitivity to the rounding itself.

API::

    model  = load(model_dir)
    logits = forward_prefill(model, ids, trace=None)   # [T, V] float64
    logits = forward_decode(model, ids, trace=None)    # [T, V] float64

``trace``, if a dict, receives named intermediates, each an array [T, ...] (rows = positions):

    embed                   E[ids]                                                  [T, d]
    layers.{l}.attn_mix     pre-attention AttnRes mix a (= P at layer 0)            [T, d]
    layers.{l}.attn_in      input_layernorm(a), the attention input x               [T, d]
    layers.{l}.kda.{q,k,v,g,beta}   KDA q (normalised, scaled), k (normalised), v (after
                            conv+SiLU), log decay g, beta, heads flattened          [T, H·K] / [T, H]
    layers.{l}.mla.{q,c_hat,r}      MLA queries [T, Hm·(dn+dr)], normalised latent, shared key
    layers.{l}.attn_core    KDA o before o_norm [T, H·K]; MLA O before the gate [T, Hm·dv]
    layers.{l}.attn_out     sublayer output A (after o_proj)                        [T, d]
    layers.{l}.mlp_mix      MLP-side AttnRes mix m                                  [T, d]
    layers.{l}.ffn_in       post_attention_layernorm(m)                             [T, d]
    layers.{l}.moe.{router_logits,weights,combine}  router logits, final routing weights
                            (0 = not selected), routed combine before its norm      [T, E] / [T, Lt]
    layers.{l}.ffn_out      FFN output F                                            [T, d]
    layers.{l}.out          prefix sum P after the layer                            [T, d]
    output_mix, final_norm, logits                                                  [T, d] / [T, V]

CLI::

    python3 tests/reference/k3_ref.py MODEL_DIR --ids 1,2,3 [--decode] -o out.npy

writes the logits as float32 [T, vocab].

Notation in shape comments: T tokens in this call, d hidden, H/K KDA heads and head dim
(d_k = d_v = K), Hm MLA heads, dn/dr/dv MLA nope/rope/value head dims, Lq/Lkv the MLA LoRA ranks,
E experts, I expert width, Lt latent width (routed_expert_hidden_size), S cached positions.
"""

import argparse
import json
import os
import struct
import sys

import numpy as np

KDA_CHUNK = 64          # chunk length of the chunkwise-parallel KDA form (§3.8)
L2NORM_EPS = 1e-6       # KDA q/k L2 normalisation epsilon, inside the sqrt (§3.5)
MLA_LORA_EPS = 1e-6     # q_a_layernorm / kv_a_layernorm epsilon (§0.1): NOT rms_norm_eps
ROUTER_EPS = 1e-20      # denominator guard of the top-k renormalisation (§6.3)

# ------------------------------------------------------------------------------------------------
# Checkpoint reading (§9.1-§9.3)
# ------------------------------------------------------------------------------------------------

# E2M1 magnitudes for nibble codes 0..7 (bit 3 is the sign), §9.3.
E2M1_LUT = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=np.float64)


def bf16_bits_to_f64(u16):
    """uint16 bf16 bit patterns -> exact float64 values (bf16 is the top half of an fp32)."""
    return (u16.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def read_safetensors(path, dtypes=None):
    """Parse one .safetensors file by hand.

    Layout: u64 little-endian header length N, N bytes of JSON {name: {dtype, shape,
    data_offsets: [begin, end)}} (offsets relative to byte 8+N), then raw little-endian data.
    Returns {name: ndarray}; BF16/F32 become float64, U8 stays uint8. `dtypes`, if a dict,
    receives each tensor's stored dtype name.
    """
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = buf[base + begin: base + end]
        shape = tuple(info["shape"])
        dt = info["dtype"]
        if dtypes is not None:
            dtypes[name] = dt
        if dt == "BF16":
            arr = bf16_bits_to_f64(np.frombuffer(raw, dtype="<u2"))
        elif dt == "F32":
            arr = np.frombuffer(raw, dtype="<f4").astype(np.float64)
        elif dt == "F64":
            arr = np.frombuffer(raw, dtype="<f8").astype(np.float64)
        elif dt == "U8":
            arr = np.frombuffer(raw, dtype=np.uint8).copy()
        else:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {dt}")
        expect = int(np.prod(shape)) if shape else 1
        if arr.size != expect:
            raise ValueError(f"{path}: tensor {name}: {arr.size} elements, shape {shape}")
        out[name] = arr.reshape(shape)
    return out


def dequant_mxfp4(packed, scale):
    """MXFP4 (`mxfp4-pack-quantized`) -> exact float64 weight W[O, I] (§9.3).

    packed: uint8 [O, I/2]; low nibble = element 2j, high nibble = element 2j+1.
    scale:  uint8 [O, I/32]; E8M0 exponent, group g covers columns [32g, 32g+32): 2^(s-127).
    """
    O, half = packed.shape
    I = 2 * half
    nib = np.empty((O, I), dtype=np.uint8)
    nib[:, 0::2] = packed & 0x0F          # low nibble -> even column
    nib[:, 1::2] = packed >> 4            # high nibble -> odd column
    mag = E2M1_LUT[nib & 7]
    sign = np.where(nib & 8, -1.0, 1.0)
    if scale.shape != (O, I // 32):
        raise ValueError(f"MXFP4 scale shape {scale.shape}, expected {(O, I // 32)}")
    s = np.ldexp(1.0, scale.astype(np.int64) - 127)       # [O, I/32], exact powers of two
    return sign * mag * np.repeat(s, 32, axis=1)          # [O, I]


class Model:
    """Config (the text_config dict, `cfg`) plus all tensors as float64 (`w`, keyed by the short
    name without the `language_model.` prefix; experts already dequantized to `.../wN.weight`)."""

    def __init__(self, cfg, tensors, top_cfg):
        self.top_cfg = top_cfg
        self.cfg = cfg
        self.w = tensors
        la = cfg["linear_attn_config"]
        n = cfg["num_hidden_layers"]
        full = set(la.get("full_attn_layers") or [])
        kda = set(la.get("kda_layers") or [])
        self.attn_kind = []            # per 0-based layer: "kda" or "mla"
        for l in range(n):
            is_mla, is_kda = (l + 1) in full, (l + 1) in kda      # the lists are 1-based
            if is_mla == is_kda:
                raise ValueError(f"layer {l}: in both or neither of full_attn_layers/kda_layers")
            self.attn_kind.append("mla" if is_mla else "kda")
        fk = cfg.get("first_k_dense_replace", 0)
        freq = cfg.get("moe_layer_freq", 1)
        moe = cfg.get("num_experts", 0) > 0                  # no experts: every FFN is dense
        self.ffn_kind = ["moe" if (moe and l >= fk and l % freq == 0) else "dense" for l in range(n)]
        self.eps = float(cfg["rms_norm_eps"])
        self.beta1 = float(cfg["activation_situ_beta"])
        self.beta2 = float(cfg["activation_situ_linear_beta"])

    def schedule(self):
        """e.g. ('KKKM', 'DEEE')."""
        return ("".join("K" if k == "kda" else "M" for k in self.attn_kind),
                "".join("D" if k == "dense" else "E" for k in self.ffn_kind))

    def layer(self, l):
        return f"model.layers.{l}."


def load(model_dir, dtype=np.float64):
    """Read config.json + model.safetensors.index.json + shards into a Model (all float64).

    `dtype=np.float32` gives an fp32 emulation of the same algorithms (every activation then
    follows the weights' dtype); it is used only to measure how close an fp32 engine can get."""
    with open(os.path.join(model_dir, "config.json")) as f:
        top = json.load(f)
    cfg = top["text_config"] if "text_config" in top else top
    idx_path = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(idx_path):
        with open(idx_path) as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
    else:
        shards = ["model.safetensors"]
    raw, stored = {}, {}
    for sh in shards:
        for k, v in read_safetensors(os.path.join(model_dir, sh), stored).items():
            if k in raw:
                raise ValueError(f"tensor {k} appears in two shards")
            raw[k] = v
    bf16_names = {k for k, dt in stored.items() if dt == "BF16"}
    tensors, lowp = {}, set()
    for k, v in raw.items():
        if not k.startswith("language_model."):
            continue                                    # vision tower etc.: not the text model
        short = k[len("language_model."):]
        if short.endswith(".weight_packed"):
            base = short[: -len(".weight_packed")]
            tensors[base + ".weight"] = dequant_mxfp4(v, raw[k[: -len("weight_packed")] + "weight_scale"])
            lowp.add(base + ".weight")
        elif short.endswith(".weight_scale"):
            continue                                    # consumed with its weight_packed
        else:
            tensors[short] = v
            if k in bf16_names:
                lowp.add(short)
    tensors = {k: v.astype(dtype) for k, v in tensors.items()}
    m = Model(cfg, tensors, top)
    m.lowp = lowp  # names of the weights stored BF16 or MXFP4
    return m


# ------------------------------------------------------------------------------------------------
# Elementary pieces
# ------------------------------------------------------------------------------------------------

def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def silu(x):
    return x * sigmoid(x)


def rmsnorm(x, w, eps):
    """KimiRMSNorm (§0.1) in float64: w ⊙ x / sqrt(mean(x²) + eps), over the last axis."""
    return w * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps))


# --round-bf16: ids of the weight arrays stored BF16 or MXFP4 (their matmul inputs are rounded).
_ROUNDED = set()


def round_bf16(x):
    """x through fp32 to bf16, round to nearest even (the engine's rounding), back to float64."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32).astype(np.float64)


def set_round_bf16(m, on):
    """Round the inputs of m's low-precision matmuls to bf16 (True) or keep them exact."""
    _ROUNDED.clear()
    if on:
        _ROUNDED.update(id(m.w[k]) for k in m.lowp)


def rounds(W):
    """Whether a matmul with the weight W (an array of the model's w) rounds its input."""
    return id(W) in _ROUNDED


def linear(x, W, exact=False):
    """y = x · Wᵀ with W stored [out, in] (§0); x rounded to bf16 under --round-bf16 when W is
    stored BF16/MXFP4, unless exact (the router)."""
    if not exact and rounds(W):
        x = round_bf16(x)
    return x @ W.T


def situ_glu(a, b, beta1, beta2):
    """SiTU-GLU φ(a, b) = β₁·tanh(a/β₁)·σ(a) · β₂·tanh(b/β₂)  (§6.1)."""
    return beta1 * np.tanh(a / beta1) * sigmoid(a) * (beta2 * np.tanh(b / beta2))


def softmax(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


# ------------------------------------------------------------------------------------------------
# Block Attention Residuals: Mix (§5.1)
# ------------------------------------------------------------------------------------------------

def attn_res_mix(P, B, w_norm, w_proj, eps):
    """Mix(P, B): softmax over depth of per-token scores, mixing the RAW candidates.

    P: [T, d] current prefix sum; B: list of n sealed slots, each [T, d]; w_norm [d]; w_proj [1, d].
    Candidates are B_0 … B_{n-1}, P (P last). Returns [T, d].
    """
    V = np.stack(list(B) + [P], axis=0)                              # [n+1, T, d]
    rho = 1.0 / np.sqrt(np.mean(V * V, axis=-1) + eps)               # [n+1, T]
    wv = w_norm * w_proj.reshape(-1)                                 # [d] folded norm ⊙ proj
    s = (V @ wv) * rho                                               # [n+1, T] scores
    p = softmax(s, axis=0)                                           # [n+1, T] over candidates
    return np.einsum("nt,ntd->td", p, V)                             # [T, d]


# ------------------------------------------------------------------------------------------------
# KDA (§3)
# ------------------------------------------------------------------------------------------------

def kda_recurrent(q, k, v, g, beta, S):
    """Token-by-token KDA recurrence (§3.6), one call for all heads.

    q, k: [T, H, K] (already L2-normalised; q already scaled); v: [T, H, V];
    g: [T, H, K] log decay (< 0); beta: [T, H]; S: [H, K, V] state (rows = key channel).
    Returns o [T, H, V] and the new state.
    """
    T = q.shape[0]
    S = S.copy()
    o = np.zeros(v.shape, dtype=v.dtype)
    for t in range(T):
        S = np.exp(g[t])[:, :, None] * S                            # S̄ = Diag(α_t) S   [H,K,V]
        u = v[t] - np.einsum("hkv,hk->hv", S, k[t])                 # u = v − S̄ᵀk       [H,V]
        S = S + beta[t][:, None, None] * k[t][:, :, None] * u[:, None, :]   # + β k uᵀ
        o[t] = np.einsum("hkv,hk->hv", S, q[t])                     # o = S_tᵀ q        [H,V]
    return o, S


def kda_chunk(q, k, v, g, beta, S, C=KDA_CHUNK):
    """Chunkwise-parallel KDA (§3.8), mathematically identical to kda_recurrent.

    Same arguments and results as kda_recurrent. The last chunk may be shorter than C (that is
    the same as padding it with k = v = g = β = 0).
    """
    T, H, K = q.shape
    S = S.copy()                                                     # [H, K, V]
    o = np.zeros(v.shape, dtype=v.dtype)                             # [T, H, V]
    for c0 in range(0, T, C):
        c1 = min(c0 + C, T)
        n = c1 - c0
        for h in range(H):
            qc, kc, vc = q[c0:c1, h], k[c0:c1, h], v[c0:c1, h]      # [n,K],[n,K],[n,V]
            bc = beta[c0:c1, h]                                      # [n]
            Gam = np.cumsum(g[c0:c1, h], axis=0)                     # Γ_r = Σ_{s≤r} g_s  [n,K]
            # D[r,s,i] = e^{Γ_r[i] − Γ_s[i]} for s ≤ r (≤ 1), else 0 (masked before exp).
            diff = Gam[:, None, :] - Gam[None, :, :]                 # [n, n, K]
            lower_eq = np.tril(np.ones((n, n), dtype=bool))          # s ≤ r
            D = np.where(lower_eq[:, :, None], np.exp(np.where(lower_eq[:, :, None], diff, 0.0)), 0.0)
            KK = np.einsum("ri,si,rsi->rs", kc, kc, D)               # Σ_i k_r k_s e^{Γr−Γs} [n,n]
            M = bc[:, None] * np.tril(KK, -1)                        # strictly lower    [n, n]
            # (I + M)^{-1} by forward substitution (unit lower-triangular), row by row.
            Inv = np.eye(n, dtype=q.dtype)
            for r in range(1, n):
                Inv[r, :r] = -M[r, :r] @ Inv[:r, :r]
            Tm = Inv * bc[None, :]                                   # T = (I+M)^{-1} Diag(β)
            W = Tm @ (np.exp(Gam) * kc)                              # [n, K]
            U = Tm @ vc                                              # [n, V]
            Vn = U - W @ S[h]                                        # new values Ṽ   [n, V]
            QK = np.einsum("ri,si,rsi->rs", qc, kc, D)               # incl. diagonal  [n, n]
            o[c0:c1, h] = (qc * np.exp(Gam)) @ S[h] + QK @ Vn        # [n, V]
            decay_to_end = np.exp(Gam[-1][None, :] - Gam)            # e^{Γ_C − Γ_s}  [n, K]
            S[h] = np.exp(Gam[-1])[:, None] * S[h] + (decay_to_end * kc).T @ Vn
    return o, S


def causal_conv_silu(xh, w, conv_state):
    """Depthwise causal conv (kernel kc) + SiLU (§3.3).

    xh: [T, Ch] projected inputs; w: [Ch, 1, kc] taps (tap kc-1 multiplies the current token);
    conv_state: [kc-1, Ch] the previous kc-1 pre-conv inputs (zeros at sequence start).
    Returns (out [T, Ch], new conv_state [kc-1, Ch]).
    """
    kc = w.shape[-1]
    buf = np.concatenate([conv_state, xh], axis=0)                  # [kc-1+T, Ch]
    T = xh.shape[0]
    acc = np.zeros_like(xh)
    for j in range(kc):
        acc += w[:, 0, j] * buf[j:j + T]                             # tap j sees x_{t-(kc-1)+j}
    return silu(acc), buf[buf.shape[0] - (kc - 1):].copy()


def l2norm(x, eps=L2NORM_EPS):
    return x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + eps)


def kda_layer(m, l, x, st, mode, trace):
    """KDA sublayer (§3). x: [T, d] output of input_layernorm. st: this layer's state dict."""
    cfg = m.cfg
    la = cfg["linear_attn_config"]
    H, K = la["num_heads"], la["head_dim"]
    T = x.shape[0]
    p = m.layer(l) + "self_attn."
    w = m.w
    if not st:
        kc = la.get("short_conv_kernel_size", 4)
        z = lambda *shape: np.zeros(shape, dtype=x.dtype)
        st.update(conv_q=z(kc - 1, H * K), conv_k=z(kc - 1, H * K), conv_v=z(kc - 1, H * K),
                  S=z(H, K, K))
    # §3.2-3.3 projections and short convs
    q, st["conv_q"] = causal_conv_silu(linear(x, w[p + "q_proj.weight"]), w[p + "q_conv1d.weight"], st["conv_q"])
    k, st["conv_k"] = causal_conv_silu(linear(x, w[p + "k_proj.weight"]), w[p + "k_conv1d.weight"], st["conv_k"])
    v, st["conv_v"] = causal_conv_silu(linear(x, w[p + "v_proj.weight"]), w[p + "v_conv1d.weight"], st["conv_v"])
    q, k, v = q.reshape(T, H, K), k.reshape(T, H, K), v.reshape(T, H, K)   # [T, H, K]
    # §3.4 safe gate: g = L · σ(exp(A[h]) · (f + dt_bias)); A_log is padded, use the first H.
    f = linear(linear(x, w[p + "f_a_proj.weight"]), w[p + "f_b_proj.weight"]).reshape(T, H, K)
    A = w[p + "A_log"].reshape(-1)[:H]                              # [H]
    dt = w[p + "dt_bias"].reshape(H, K)                             # [H, K]
    g = la["gate_lower_bound"] * sigmoid(np.exp(A)[None, :, None] * (f + dt[None]))   # [T,H,K]
    # §3.5 β, L2 norm, query scale
    beta = sigmoid(linear(x, w[p + "b_proj.weight"]))               # [T, H]
    q = l2norm(q) * K ** -0.5
    k = l2norm(k)
    if trace is not None:
        for nm, val in (("q", q), ("k", k), ("v", v), ("g", g), ("beta", beta)):
            trace[f"layers.{l}.kda.{nm}"] = val.reshape(T, -1)
    # §3.6 / §3.8
    if mode == "prefill":
        o, st["S"] = kda_chunk(q, k, v, g, beta, st["S"])
    else:
        o, st["S"] = kda_recurrent(q, k, v, g, beta, st["S"])        # o: [T, H, K]
    if trace is not None:
        trace[f"layers.{l}.attn_core"] = o.reshape(T, H * K)
    # §3.7 gated RMSNorm (sigmoid gate, per head over K dims), o_proj
    z = linear(x, w[p + "g_proj.weight"]).reshape(T, H, K)
    y = o / np.sqrt(np.mean(o * o, axis=-1, keepdims=True) + m.eps) * w[p + "o_norm.weight"] * sigmoid(z)
    return linear(y.reshape(T, H * K), w[p + "o_proj.weight"])      # [T, d]


# ------------------------------------------------------------------------------------------------
# MLA (§4)
# ------------------------------------------------------------------------------------------------

def mla_layer(m, l, x, st, mode, trace):
    """Gated MLA with NoPE (§4). x: [T, d]. st holds the latent cache c [S, Lkv], r [S, dr]."""
    cfg = m.cfg
    Hm = cfg["num_attention_heads"]
    dn, dr, dv = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    Lkv = cfg["kv_lora_rank"]
    T = x.shape[0]
    p = m.layer(l) + "self_attn."
    w = m.w
    if not st:
        st.update(c=np.zeros((0, Lkv), dtype=x.dtype), r=np.zeros((0, dr), dtype=x.dtype))
    # queries through the LoRA path
    cq = rmsnorm(linear(x, w[p + "q_a_proj.weight"]), w[p + "q_a_layernorm.weight"], MLA_LORA_EPS)
    Q = linear(cq, w[p + "q_b_proj.weight"]).reshape(T, Hm, dn + dr)   # [T, Hm, dn+dr]
    qN, qR = Q[..., :dn], Q[..., dn:]                                # [T,Hm,dn], [T,Hm,dr]
    # latent KV: c (normalised) and the shared, un-normalised, never-rotated key r
    a = linear(x, w[p + "kv_a_proj_with_mqa.weight"])               # [T, Lkv+dr]
    c_hat = rmsnorm(a[:, :Lkv], w[p + "kv_a_layernorm.weight"], MLA_LORA_EPS)   # [T, Lkv]
    r = a[:, Lkv:]                                                   # [T, dr]
    if trace is not None:
        trace[f"layers.{l}.mla.q"] = Q.reshape(T, -1)
        trace[f"layers.{l}.mla.c_hat"] = c_hat
        trace[f"layers.{l}.mla.r"] = r
    st["c"] = np.concatenate([st["c"], c_hat], axis=0)               # [S, Lkv]
    st["r"] = np.concatenate([st["r"], r], axis=0)                   # [S, dr]
    S = st["c"].shape[0]
    T0 = S - T                                                       # positions already cached
    # causal mask: query t (absolute T0+t) sees τ ≤ T0+t
    mask = np.arange(S)[None, :] <= (T0 + np.arange(T))[:, None]    # [T, S]
    scale = (dn + dr) ** -0.5
    Wkvb = w[p + "kv_b_proj.weight"].reshape(Hm, dn + dv, Lkv)      # [Hm, dn+dv, Lkv]
    rnd = round_bf16 if rounds(w[p + "kv_b_proj.weight"]) else (lambda a: a)  # --round-bf16
    W_UK, W_UV = Wkvb[:, :dn, :], Wkvb[:, dn:, :]                    # [Hm,dn,Lkv], [Hm,dv,Lkv]
    if mode == "prefill":
        # §4.2 expanded: per-head K = [k^N ; r], V from the latent
        c = rnd(st["c"])                                             # [S, Lkv]
        kN = np.einsum("hnc,sc->shn", W_UK, c)                       # [S, Hm, dn]
        vv = np.einsum("hvc,sc->shv", W_UV, c)                       # [S, Hm, dv]
        s = (np.einsum("thn,shn->hts", qN, kN) + np.einsum("thr,sr->hts", qR, st["r"])) * scale
        s = np.where(mask[None], s, -np.inf)                         # [Hm, T, S]
        pr = softmax(s, axis=-1)
        o = np.einsum("hts,shv->thv", pr, vv)                        # [T, Hm, dv]
    else:
        # §4.3 absorbed: q̃ = W_UKᵀ q^N in latent space, attend over the cached (ĉ, r)
        qt = np.einsum("hnc,thn->thc", W_UK, rnd(qN))                # [T, Hm, Lkv]
        s = (np.einsum("thc,sc->hts", qt, st["c"]) + np.einsum("thr,sr->hts", qR, st["r"])) * scale
        s = np.where(mask[None], s, -np.inf)                         # [Hm, T, S]
        pr = softmax(s, axis=-1)
        obar = np.einsum("hts,sc->thc", pr, st["c"])                 # [T, Hm, Lkv]
        o = np.einsum("hvc,thc->thv", W_UV, rnd(obar))               # [T, Hm, dv]
    O = o.reshape(T, Hm * dv)                                        # index h·dv + j
    if trace is not None:
        trace[f"layers.{l}.attn_core"] = O
    O = O * sigmoid(linear(x, w[p + "g_proj.weight"]))              # output gate
    return linear(O, w[p + "o_proj.weight"])                        # [T, d]


# ------------------------------------------------------------------------------------------------
# FFNs (§6)
# ------------------------------------------------------------------------------------------------

def dense_ffn(m, prefix, x):
    """SiTU-GLU FFN: φ(x W_gateᵀ, x W_upᵀ) W_downᵀ.  x: [T, d_in] -> [T, d_in]."""
    w = m.w
    a = linear(x, w[prefix + "gate_proj.weight"])
    b = linear(x, w[prefix + "up_proj.weight"])
    return linear(situ_glu(a, b, m.beta1, m.beta2), w[prefix + "down_proj.weight"])


def router(m, l, x):
    """Sigmoid router with selection bias (§6.3). x: [T, d]. Returns dense weights [T, E]
    (zero for unselected experts) and the selection [T, k]."""
    cfg = m.cfg
    p = m.layer(l) + "block_sparse_moe.gate."
    E, k = cfg["num_experts"], cfg["num_experts_per_token"]
    s = sigmoid(linear(x, m.w[p + "weight"], exact=True))           # [T, E] unbiased scores
    biased = s + m.w[p + "e_score_correction_bias"][None, :]        # bias ONLY for selection
    sel = np.argsort(-biased, axis=-1, kind="stable")[:, :k]        # [T, k]
    ws = np.take_along_axis(s, sel, axis=-1)                        # [T, k] from unbiased s
    if k > 1 and cfg.get("moe_renormalize", True):
        ws = ws / (np.sum(ws, axis=-1, keepdims=True) + ROUTER_EPS)
    ws = ws * cfg.get("routed_scaling_factor", 1.0)
    dense = np.zeros((x.shape[0], E), dtype=x.dtype)
    np.put_along_axis(dense, sel, ws, axis=-1)
    return dense, sel


def latent_moe(m, l, x, trace=None):
    """Stable LatentMoE (§6.4). x: [T, d] (post_attention_layernorm output) -> [T, d]."""
    cfg = m.cfg
    p = m.layer(l) + "block_sparse_moe."
    w = m.w
    E = cfg["num_experts"]
    wts, _ = router(m, l, x)                                        # [T, E]
    if trace is not None:
        trace[f"layers.{l}.moe.router_logits"] = linear(x, w[p + "gate.weight"], exact=True)
        trace[f"layers.{l}.moe.weights"] = wts                      # [T, E], 0 = not selected
    z = linear(x, w[p + "routed_expert_down_proj.weight"])          # [T, Lt] latent
    c = np.zeros_like(z)                                            # [T, Lt] combine
    for e in range(E):
        rows = np.nonzero(wts[:, e])[0]
        if rows.size == 0:
            continue
        ep = p + f"experts.{e}."
        ze = z[rows]
        ye = linear(situ_glu(linear(ze, w[ep + "w1.weight"]), linear(ze, w[ep + "w3.weight"]),
                             m.beta1, m.beta2), w[ep + "w2.weight"])   # [rows, Lt]
        c[rows] += wts[rows, e][:, None] * ye
    if trace is not None:
        trace[f"layers.{l}.moe.combine"] = c                        # before routed_expert_norm
    if cfg.get("latent_moe_use_norm", True):
        c = rmsnorm(c, w[p + "routed_expert_norm.weight"], m.eps)    # norm after combine
    out = linear(c, w[p + "routed_expert_up_proj.weight"])          # [T, d]
    if cfg.get("num_shared_experts", 0) > 0:
        out = out + dense_ffn(m, p + "shared_experts.", x)          # on the full-width x
    return out


# ------------------------------------------------------------------------------------------------
# Whole model (§2, §5.2)
# ------------------------------------------------------------------------------------------------

def new_state(m):
    """Per-sequence decode state: one dict per layer, filled lazily (KDA: conv_q/k/v [kc-1, H·K]
    and S [H, K, K]; MLA: latent cache c [S, Lkv] and r [S, dr])."""
    return [dict() for _ in range(m.cfg["num_hidden_layers"])]


def forward(m, ids, state, mode, trace=None):
    """Run the tokens `ids` (continuing `state`) through the model. mode 'prefill' uses chunked
    KDA + expanded MLA, 'decode' uses recurrent KDA + absorbed MLA (for any T). Returns [T, V]."""
    cfg = m.cfg
    w = m.w
    eps = m.eps
    bs = cfg["attn_res_block_size"]
    ids = np.asarray(ids, dtype=np.int64)
    h = w["model.embed_tokens.weight"][ids]                         # [T, d]
    if trace is not None:
        trace["embed"] = h
    P, B = h, []                                                     # prefix sum, sealed slots
    for l in range(cfg["num_hidden_layers"]):
        pl = m.layer(l)
        # §5.2 step 1: pre-attention mix (skipped only while there are no slots: layer 0)
        if B:
            a = attn_res_mix(P, B, w[pl + "self_attention_res_norm.weight"],
                             w[pl + "self_attention_res_proj.weight"], eps)
        else:
            a = P
        # step 2: seal
        if l % bs == 0:
            B.append(P)
            P = None
        # step 3: attention on the normalised mix
        x = rmsnorm(a, w[pl + "input_layernorm.weight"], eps)
        if m.attn_kind[l] == "kda":
            A = kda_layer(m, l, x, state[l], mode, trace)
        else:
            A = mla_layer(m, l, x, state[l], mode, trace)
        # step 4
        P = A if P is None else P + A
        # step 5-7: MLP-side mix, FFN, add
        mm = attn_res_mix(P, B, w[pl + "mlp_res_norm.weight"], w[pl + "mlp_res_proj.weight"], eps)
        xf = rmsnorm(mm, w[pl + "post_attention_layernorm.weight"], eps)
        if m.ffn_kind[l] == "dense":
            F = dense_ffn(m, pl + "mlp.", xf)
        else:
            F = latent_moe(m, l, xf, trace)
        P = P + F
        if trace is not None:
            trace[f"layers.{l}.attn_mix"] = a
            trace[f"layers.{l}.attn_in"] = x
            trace[f"layers.{l}.attn_out"] = A
            trace[f"layers.{l}.mlp_mix"] = mm
            trace[f"layers.{l}.ffn_in"] = xf
            trace[f"layers.{l}.ffn_out"] = F
            trace[f"layers.{l}.out"] = P
    # §2 steps 4-6: output mix over all slots + P, final norm, lm_head
    xo = attn_res_mix(P, B, w["model.output_attn_res_norm.weight"],
                      w["model.output_attn_res_proj.weight"], eps)
    xn = rmsnorm(xo, w["model.norm.weight"], eps)
    logits = linear(xn, w["lm_head.weight"])                        # [T, V]
    if trace is not None:
        trace["output_mix"] = xo
        trace["final_norm"] = xn
        trace["logits"] = logits
    return logits


def forward_prefill(m, ids, trace=None):
    """Whole prompt in one pass from an empty state (chunked KDA, expanded MLA). [T, V]."""
    return forward(m, ids, new_state(m), "prefill", trace)


def forward_decode(m, ids, trace=None):
    """Token by token from an empty state (recurrent KDA, absorbed MLA latent cache). [T, V]."""
    state = new_state(m)
    rows = []
    steps = []
    for t in ids:
        tr = {} if trace is not None else None
        rows.append(forward(m, [t], state, "decode", tr)[0])
        steps.append(tr)
    if trace is not None:
        for name in steps[0]:
            trace[name] = np.concatenate([s[name] for s in steps], axis=0)
    return np.stack(rows, axis=0)


def rel_l2_rows(a, b):
    """Relative L2 error per row: ||a−b|| / ||b||."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return np.linalg.norm(a - b, axis=-1) / np.linalg.norm(b, axis=-1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("--ids", help="comma-separated token ids (default: the case's tokens.json)")
    ap.add_argument("--decode", action="store_true", help="token-by-token path instead of prefill")
    ap.add_argument("-o", "--out", help="write float32 logits [T, vocab] to this .npy")
    ap.add_argument("--trace", help="write all named intermediates (float64) to this .npz")
    ap.add_argument("--round-bf16", action="store_true",
                    help="emulate the engine's bf16 precision mode (the matmul inputs rounded)")
    args = ap.parse_args(argv)
    m = load(args.model_dir)
    set_round_bf16(m, args.round_bf16)
    if args.ids:
        ids = [int(s) for s in args.ids.split(",") if s.strip()]
    else:
        with open(os.path.join(args.model_dir, "tokens.json")) as f:
            ids = json.load(f)
    trace = {} if args.trace else None
    logits = (forward_decode if args.decode else forward_prefill)(m, ids, trace)
    if args.out:
        np.save(args.out, logits.astype(np.float32))
    if args.trace:
        np.savez(args.trace, **trace)
    print(f"T={len(ids)} vocab={logits.shape[1]} argmax(last)={int(np.argmax(logits[-1]))}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
