#!/usr/bin/env python3
"""Reshape a trained K3 checkpoint: a smaller vocabulary and/or more routed experts (stdlib only).

  reshape-model.py SRC_DIR DST_DIR --config TARGET.json [--new-experts twins|fresh|silent]
                   [--init INIT_DIR]

TARGET.json is SRC's config with vocab_size, num_experts or num_experts_per_token changed
(nothing else may differ). A smaller vocab_size = N + 256 keeps the first N BPE ranks of SRC's
tiktoken.model. A byte-level BPE learned by `k3 tokenizer train` lists its tokens in merge order, and every token splits into two of lower
rank, so the first N ranks are exactly the tokenizer that training would have stopped at: no
token is new to the model. The 256 special tokens move down to N..N+255 with their embedding
and lm_head rows; ranks >= N lose theirs.

More experts adds routed experts to every MoE layer; the experts SRC has keep their bytes. The
new ones, with their router rows and correction biases: --new-experts twins makes expert E+i a
copy of expert i with the pair's router rows pushed apart (it keeps what the model computes:
use it to train on); fresh takes them from INIT_DIR, `k3 init --config TARGET.json` (--mxfp4
when SRC's experts are MXFP4), the init a run from scratch gets; silent does the same with a
zero down projection.

Why: in a byte-limited model (the default model ships at <= 25 MB) halving the vocabulary frees
the embedding and lm_head bytes for MXFP4 experts, and this keeps what the trained trunk knows
instead of starting over. Continue training DST with `k3 train -m DST`.
Writes one shard and its index; refuses a non-empty DST."""
import argparse
import json
import math
import os
import random
import shutil
import struct
import sys

PREFIX = "language_model."
N_SPECIAL = 256


def read_safetensors(path):
    """{name: (dtype, shape, bytes)} of one shard."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        out[name] = (info["dtype"], info["shape"], data[a:b])
    return out


def read_checkpoint(directory):
    index = json.load(open(os.path.join(directory, "model.safetensors.index.json")))
    tensors = {}
    for shard in sorted(set(index["weight_map"].values())):
        tensors.update(read_safetensors(os.path.join(directory, shard)))
    return tensors


def write_checkpoint(directory, tensors):
    """One shard plus its index, as k3 init writes them (names sorted, 8-byte aligned header)."""
    shard = "model-00001-of-000001.safetensors"
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name in sorted(tensors):
        dtype, shape, raw = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    tmp = os.path.join(directory, shard + ".tmp")
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(blob)) + blob)
        for name in sorted(tensors):
            f.write(tensors[name][2])
    os.replace(tmp, os.path.join(directory, shard))
    index = {"metadata": {"total_size": offset}, "weight_map": {n: shard for n in sorted(tensors)}}
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)


def row_bytes(tensor):
    dtype, shape, raw = tensor
    return len(raw) // shape[0]


def keep_rows(tensor, rows):
    """The tensor with only the listed rows (dim 0), in that order."""
    dtype, shape, raw = tensor
    width = row_bytes(tensor)
    return dtype, [len(rows)] + shape[1:], b"".join(raw[r * width:(r + 1) * width] for r in rows)


def stack_rows(first, second):
    assert first[0] == second[0] and first[1][1:] == second[1][1:], "row layouts differ"
    return first[0], [first[1][0] + second[1][0]] + first[1][1:], first[2] + second[2]


def cut_vocabulary(src, dst, tensors, text_config, top, ranks):
    """Keep ranks [0, ranks) and move the specials to ranks..ranks+255."""
    old_vocab = text_config["vocab_size"]
    old_base = old_vocab - N_SPECIAL
    rows = list(range(ranks)) + list(range(old_base, old_vocab))
    for name in ("model.embed_tokens.weight", "lm_head.weight"):
        tensors[PREFIX + name] = keep_rows(tensors[PREFIX + name], rows)
    with open(os.path.join(src, "tiktoken.model"), "rb") as f:
        lines = [line for line in f if int(line.split()[1]) < ranks]
    with open(os.path.join(dst, "tiktoken.model"), "wb") as f:
        f.writelines(lines)
    tok = json.load(open(os.path.join(src, "tokenizer_config.json")))
    tok["added_tokens_decoder"] = {str(int(k) - old_base + ranks): v
                                   for k, v in tok["added_tokens_decoder"].items()}
    with open(os.path.join(dst, "tokenizer_config.json"), "w") as f:
        json.dump(tok, f, indent=2)
    text_config["vocab_size"] = ranks + N_SPECIAL
    for config in (top, text_config):  # the ids sit in both levels of an official config
        for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
            if config.get(key, -1) >= old_base:
                config[key] += ranks - old_base


def expert_tensors(tensors, layer, expert):
    """{suffix after 'experts.N.': tensor} of one routed expert."""
    head = f"{layer}experts.{expert}."
    return {n[len(head):]: t for n, t in tensors.items() if n.startswith(head)}


def split_twin_rows(gate, old, experts, spread=0.02, seed=0):
    """Router rows of twins pushed apart: row i gets +e and its twin row old+i gets -e
    (e ~ N(0, spread * rms of the row)), so the pair splits the tokens it took and the two
    learn apart; identical rows would tie, be picked together and stay identical."""
    dtype, shape, raw = gate
    if dtype != "BF16":
        sys.exit(f"reshape-model: the router weight is {dtype}; twins need BF16")
    width = shape[1]
    values = [struct.unpack("<f", b"\0\0" + raw[i:i + 2])[0] for i in range(0, len(raw), 2)]
    rng = random.Random(seed)
    for twin in range(old, experts):
        row = (twin % old) * width
        rms = math.sqrt(sum(v * v for v in values[row:row + width]) / width)
        for c in range(width):
            e = rng.gauss(0.0, spread * rms)
            values[row + c] += e
            values[twin * width + c] -= e
    return dtype, shape, b"".join(bf16_bytes(v) for v in values)


def bf16_bytes(value):
    """value rounded to bfloat16 (nearest, ties to even), little-endian."""
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return struct.pack("<H", bits)


def grow_experts(tensors, text_config, experts, init_dir, mode):
    """Routed experts old..experts-1 in every MoE layer, with their router rows and biases.

    mode "fresh": all from init_dir (a k3 init of the target); "silent": the same with a zero
    down projection, so a new expert adds nothing until training moves it; "twins": expert
    old+i starts as a copy of expert i % old, router row and bias included."""
    old = text_config["num_experts"]
    init = read_checkpoint(init_dir) if mode != "twins" else None
    for gate in [n for n in tensors if n.endswith("block_sparse_moe.gate.weight")]:
        layer = gate[: -len("gate.weight")]
        source = tensors if mode == "twins" else init
        pick = [i % old for i in range(old, experts)] if mode == "twins" else range(old, experts)
        for suffix in ("gate.weight", "gate.e_score_correction_bias"):
            if source[layer + suffix][1][0] != (old if mode == "twins" else experts):
                sys.exit(f"reshape-model: {init_dir} has {source[layer + suffix][1][0]} experts, "
                         f"not {experts}")
            tensors[layer + suffix] = stack_rows(tensors[layer + suffix],
                                                 keep_rows(source[layer + suffix], pick))
        if mode == "twins":
            tensors[gate] = split_twin_rows(tensors[gate], old, experts)
        have = expert_tensors(tensors, layer, 0)
        for new, src in zip(range(old, experts), pick):
            parts = expert_tensors(source, layer, src)
            if set(parts) != set(have):
                sys.exit(f"reshape-model: {init_dir}'s experts are stored as {sorted(parts)}, "
                         f"the model's as {sorted(have)} (k3 init --mxfp4 matches MXFP4 experts)")
            for suffix, tensor in parts.items():
                if mode == "silent" and suffix in ("w2.weight", "w2.weight_packed"):
                    tensor = (tensor[0], tensor[1], bytes(len(tensor[2])))  # 0 in BF16 and E2M1
                tensors[f"{layer}experts.{new}.{suffix}"] = tensor
    text_config["num_experts"] = experts


def target_changes(text_config, target):
    """The text_config keys the target config changes; only the reshapeable ones may differ."""
    target = target.get("text_config", target)
    derived = {"bos_token_id", "eos_token_id", "pad_token_id"}
    changed = {k for k in set(text_config) | set(target)
               if k not in derived and text_config.get(k) != target.get(k)}
    fixed = changed - {"vocab_size", "num_experts", "num_experts_per_token"}
    if fixed:
        sys.exit("reshape-model: the target config also changes " + ", ".join(sorted(fixed)) +
                 "; only vocab_size, num_experts and num_experts_per_token can be reshaped")
    vocab = text_config["vocab_size"]
    if not 256 + N_SPECIAL <= target["vocab_size"] <= vocab:
        sys.exit(f"reshape-model: the target's vocab_size {target['vocab_size']} must lie in "
                 f"[{256 + N_SPECIAL}, {vocab}] (the ranks kept plus {N_SPECIAL} specials)")
    if target["num_experts"] < text_config["num_experts"]:
        sys.exit(f"reshape-model: the target has {target['num_experts']} experts, fewer than the "
                 f"{text_config['num_experts']} the model has (experts are only added)")
    return target, changed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("src", help="trained checkpoint")
    parser.add_argument("dst", help="new, empty directory")
    parser.add_argument("--config", required=True, help="target config.json")
    parser.add_argument("--init", help="k3 init checkpoint of the target config (for new experts)")
    parser.add_argument("--new-experts", choices=("twins", "fresh", "silent"), default="twins",
                        help="fresh: from --init; silent: from --init with a zero down "
                             "projection; twins: copies of the model's own experts")
    args = parser.parse_args()
    if os.path.isdir(args.dst) and os.listdir(args.dst):
        sys.exit(f"reshape-model: {args.dst} is not empty")
    top = json.load(open(os.path.join(args.src, "config.json")))
    text_config = top.get("text_config", top)
    target, changed = target_changes(text_config, json.load(open(args.config)))
    if (target["num_experts"] > text_config["num_experts"] and not args.init
            and args.new_experts != "twins"):
        sys.exit("reshape-model: more experts need --init, a k3 init checkpoint of the target")
    tensors = read_checkpoint(args.src)
    os.makedirs(args.dst, exist_ok=True)
    for name in ("tiktoken.model", "tokenizer_config.json"):
        shutil.copy(os.path.join(args.src, name), os.path.join(args.dst, name))
    if "vocab_size" in changed:
        cut_vocabulary(args.src, args.dst, tensors, text_config, top,
                       target["vocab_size"] - N_SPECIAL)
    if "num_experts" in changed:
        grow_experts(tensors, text_config, target["num_experts"], args.init, args.new_experts)
    text_config["num_experts_per_token"] = target["num_experts_per_token"]
    write_checkpoint(args.dst, tensors)
    with open(os.path.join(args.dst, "config.json"), "w") as f:
        json.dump(top, f, indent=2)
    size = sum(len(t[2]) for t in tensors.values())
    print(f"reshape-model: {args.dst}: vocab {text_config['vocab_size']}, "
          f"{text_config['num_experts']} experts (top {text_config['num_experts_per_token']}), "
          f"{size / 1e6:.2f} MB of tensors")


if __name__ == "__main__":
    main()
