#!/usr/bin/env python3
"""Convert a k3.cpp checkpoint (official HF layout) to GGUF with llama.cpp's own converter.

usage: convert.py CHECKPOINT_DIR OUT.gguf [--outtype f32]   (env LCPP_ROOT: where build.sh put llama.cpp)

--outtype f32 writes the trunk as F32 (the same values: BF16 widens exactly), which makes
llama.cpp compute those matmuls on F32 activations instead of rounding them to BF16.

Run it with the python build.sh made ($LCPP_ROOT/venv/bin/python). llama.cpp does all of the
tensor work (name mapping, MLA split, AttnRes fusion, MXFP4 repack: BF16 trunk, native MXFP4
experts). Two things are adapted around it, each announced on stderr:
  * Debian's torch 1.13 lacks some dtype names (float8_*, uint16..64) that the converter's
    class-level tables mention; they get inert placeholders (no K3 tensor has those dtypes).
  * The converter reads the vocabulary through the release tokenizer's remote code, which a
    k3.cpp checkpoint with its own BPE does not ship. The vocabulary is built here instead from
    the checkpoint's tiktoken.model and tokenizer_config.json: the same ids, byte-level token
    strings and BPE merges recovered from the ranks, so llama.cpp tokenises text like k3 does.
    A checkpoint with no tokenizer (a benchmark slice from `k3 init`) gets the 256 byte tokens
    and placeholders up to vocab_size: the ids line up, which is all a benchmark needs.
The output is written to OUT.gguf.tmp and renamed when complete.
"""
import base64
import json
import os
import sys


def note(msg):
    print(f"[convert.py] {msg}", file=sys.stderr)


def add_missing_torch_dtypes(torch):
    for name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
                 "uint16", "uint32", "uint64"):
        if not hasattr(torch, name):
            setattr(torch, name, object())
            note(f"torch {torch.__version__} has no torch.{name}: placeholder")


def read_tiktoken_ranks(path):
    ranks = {}
    with open(path, "rb") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2:
                ranks[base64.b64decode(parts[0])] = int(parts[1])
    return ranks


def read_special_tokens(path):
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        added = json.load(f).get("added_tokens_decoder", {})
    return {entry["content"]: int(token_id) for token_id, entry in added.items()}


def vocab_from_checkpoint(model, gguf, as_text, split_in_two):
    """Writes the GGUF vocabulary of `model` (a llama.cpp TextModel) from its tiktoken files."""
    ckpt = str(model.dir_model)
    tiktoken_path = os.path.join(ckpt, "tiktoken.model")
    if os.path.exists(tiktoken_path):
        ranks = read_tiktoken_ranks(tiktoken_path)
    else:  # a benchmark checkpoint without a tokenizer: the 256 bytes, then placeholders
        ranks = {bytes([b]): b for b in range(256)}
        note("no tiktoken.model: a vocabulary of the 256 byte tokens and placeholders")
    specials = read_special_tokens(os.path.join(ckpt, "tokenizer_config.json"))
    vocab_size = int(model.hparams["vocab_size"])
    by_id = {rank: as_text(token) for token, rank in ranks.items()}
    merges = []
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        if len(token) > 1:
            parts = split_in_two(ranks, token, max_rank=rank)
            if len(parts) == 2:
                merges.append(" ".join(as_text(p) for p in parts))
    special_ids = set()
    for text, token_id in specials.items():
        if token_id < vocab_size:
            by_id[token_id] = text
            special_ids.add(token_id)
    tokens, types = [], []
    for i in range(vocab_size):
        if i in by_id:
            tokens.append(by_id[i])
            types.append(gguf.TokenType.CONTROL if i in special_ids else gguf.TokenType.NORMAL)
        else:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
    w = model.gguf_writer
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("kimi-k2")  # K3 keeps K2's pre-tokenizer
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    for key, add in (("bos_token_id", w.add_bos_token_id), ("eos_token_id", w.add_eos_token_id),
                     ("pad_token_id", w.add_pad_token_id)):
        token_id = model.hparams.get(key)
        if isinstance(token_id, int) and 0 <= token_id < vocab_size:
            add(token_id)
    w.add_add_bos_token(False)
    note(f"vocabulary from tiktoken.model: {len(ranks)} ranks, {len(merges)} merges, "
         f"{len(special_ids)} special tokens, {vocab_size} ids")


def main():
    if len(sys.argv) not in (3, 5) or (len(sys.argv) == 5 and sys.argv[3] != "--outtype"):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    ckpt, out = sys.argv[1], os.path.abspath(sys.argv[2])
    outtype = sys.argv[4:5]
    if not os.path.exists(os.path.join(ckpt, "config.json")):
        sys.exit(f"convert.py: {ckpt} has no config.json")
    root = os.environ.get("LCPP_ROOT", os.path.expanduser("~/.cache/k3-llamacpp"))
    src = os.path.join(root, "src")
    if not os.path.exists(os.path.join(src, "convert_hf_to_gguf.py")):
        sys.exit(f"convert.py: no llama.cpp under {src} (run bench/llamacpp/build.sh)")
    sys.path[:0] = [src, os.path.join(src, "gguf-py")]

    import torch
    add_missing_torch_dtypes(torch)
    import gguf
    from conversion import kimi_k3
    from conversion.qwen import QwenModel

    def set_vocab(model):
        vocab_from_checkpoint(model, gguf, QwenModel.token_bytes_to_string, QwenModel.bpe)

    kimi_k3.KimiK3Model.set_vocab = set_vocab
    import convert_hf_to_gguf
    sys.argv = ["convert_hf_to_gguf.py", ckpt, "--outfile", out + ".tmp"]
    if outtype:
        sys.argv += ["--outtype", outtype[0]]
    convert_hf_to_gguf.main()
    os.replace(out + ".tmp", out)
    note(f"wrote {out}")


if __name__ == "__main__":
    main()
