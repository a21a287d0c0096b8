#!/usr/bin/env python3
"""Builds the tokenizer fixture in tests/data/tokenizer/ with tiktoken as the oracle.

* tiktoken.model — a small byte-level BPE vocabulary trained here on the generated text (single
  bytes first, in a shuffled-printable order so that rank != byte value, then the merges in
  training order, then a few whole words that no merge sequence reaches).
* tokenizer_config.json — K3's 16 named specials at K3's offsets from vocab_base
  (`[BOS]` = vocab_base + 0 … `[PAD]` = vocab_base + 255), the rest `<|reserved_token_{id}|>`.
* cases.bin.xz — deterministic varied text (> 5 MB) encoded the way K3's Hugging Face tokenizer
  does it (§10.4: 400,000-char slices, then cuts where a whitespace / non-whitespace run would
  pass 25,000 chars, then tiktoken on each piece, specials allowed or not), plus decode cases
  (ids → tiktoken's decode with UTF-8 replacement).

cases.bin (before xz; all integers little-endian) is "K3TOKFX1", u32 case count, a case table,
then every case's UTF-8 text back to back, then every id list back to back as u32. A case table
entry is u8 kind, u32 text byte length, then u32 length of each of its id lists. Kind 0: a text and
its ids with specials allowed (one list). Kind 1: the same, then the ids with specials disallowed
(two lists). Kind 2: a decode case: the text is tiktoken's decode (errors="replace") of the list.

Usage: pip install tiktoken; python3 tests/reference/make_tokenizer_fixture.py
"""
import heapq
import json
import lzma
import os
import random
import re
import struct
import sys

import tiktoken

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT_DIR = os.path.join(ROOT, "tests", "data", "tokenizer")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_unicode_tables import class_flags, runs  # noqa: E402

# K3's pre-tokenizer pattern (spec §10.3), exactly as tokenization_kimi.py builds it.
K3_PATTERN = "|".join([
    r"""[\p{Han}]+""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])

# K3's named specials by offset from vocab_base (163584 in the real model), and their flag.
K3_NAMED_SPECIALS = {
    0: ("[BOS]", True), 1: ("[EOS]", True), 2: ("<|end_of_msg|>", True),
    3: ("<|open|>", False), 4: ("<|close|>", False), 5: ("<|sep|>", False),
    6: ("[start_header_id]", True), 7: ("[end_header_id]", True), 9: ("[EOT]", True),
    18: ("<|media_begin|>", True), 19: ("<|media_content|>", True),
    20: ("<|media_end|>", True), 21: ("<|media_pad|>", True), 65: ("<osagent_mode>", True),
    254: ("[UNK]", True), 255: ("[PAD]", True),
}
N_SPECIALS = 256
MAX_SLICE_CHARS = 400_000
MAX_RUN_CHARS = 25_000
N_MERGES = 6000
TARGET_BYTES = 5_300_000

R = random.Random(20260317)

# ---------------------------------------------------------------------------------------------
# Text generators. Each returns a str; all randomness comes from R.

EN = ("the of and to in is that for it as was with be by on not he this are or his from at which "
      "but have an they you were her she there been one all we their has would when if so no will "
      "can more about out up them some could into what other then its only time new like just "
      "over also after two first way because people year work good day most us should world "
      "through where between long under never each same another know while last might great old "
      "number part place small again home large often until always important children side "
      "without something father family though question however system program government during "
      "information development water kernel memory tokenizer engine matrix vector attention layer "
      "model weight gradient buffer thread queue socket server client request response value "
      "string index pointer function return variable compile library module context batch "
      "sequence sample random seed float integer double boolean template namespace struct class "
      "public private static const virtual inline Monday London Paris Kimi Moonshot Python "
      "JavaScript GitHub OpenAI iPhone McDonald O'Brien naïve café résumé coöperate façade "
      "Zürich São Ångström").split()
RU = ("привет мир это было очень хорошо как дела что где когда почему потому что язык модель "
      "данные память сервер Москва Россия Толстой ЗДРАВСТВУЙТЕ Їжак ґанок Україна Беларусь "
      "щука съезд ёлка").split()
EL = "Καλημέρα κόσμε ΑΘΗΝΑ λόγος ψυχή ΣΟΦΙΑ ἀρχή ᾈδης φιλοσοφία".split()
HE = "שָׁלוֹם עוֹלָם ספר מים ירושלים תּוֹרָה".split()
HANZI = ("的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对"
         "可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三"
         "已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问"
         "力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代"
         "军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死"
         "常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直"
         "龘𠀀𠮷𪚥鿿〇々")
CJK_PUNCT = "、。「」『』（）！？：；，《》〈〉【】〔〕…—～・〃〆〜"
HIRAGANA = "".join(chr(c) for c in range(0x3041, 0x3097))
KATAKANA = "".join(chr(c) for c in range(0x30A1, 0x30FB)) + "ー"
EMOJI = ["😀", "😂", "🤖", "🚀", "❤️", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇯🇵", "🇺🇸", "1️⃣", "#️⃣",
         "🧑🏿‍💻", "👩‍❤️‍💋‍👨", "✌︎", "☃", "🫠", "🦀", "🐍", "⭐", "🔥🔥🔥", "\u200d", "\ufe0f"]
SPACES = ["\t", "\n", "\r\n", "\r", "\x0b", "\x0c", "\x85", "\xa0", "\u2003", "\u3000", "\u2028",
          "\u2029", "\u202f", "\u205f", "\u1680", "\x1c", "\x1f", "\u200b", "\u180e", "\ufeff"]
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'vE", "'M",
                "'LL", "'Ll", "'D", "'ſ", "'ſt", "’s", "'x", "''s", "'", "'rE", "'lL"]
SYMBOLS = list(".,;:!?-–—()[]{}<>/\\|@#$%^&*_+=~`\"'") + ["...", "->", "=>", "::", "&&", "||",
                                                          "!=", "==", "<=", "/*", "*/", "//"]


def pick(seq):
    return seq[R.randrange(len(seq))]


def zipf_word(words):
    # Favour the head of the list, like natural text.
    return words[min(int(R.paretovariate(1.2)) - 1, len(words) - 1)]


def number():
    k = R.randrange(10)
    if k == 0:
        return str(R.randrange(10 ** R.randrange(1, 25)))
    if k == 1:
        return "%d,%03d,%03d" % (R.randrange(1000), R.randrange(1000), R.randrange(1000))
    if k == 2:
        return "%.*f" % (R.randrange(1, 6), R.uniform(-1e4, 1e4))
    if k == 3:
        return "0x%X" % R.getrandbits(32)
    if k == 4:
        return "%04d-%02d-%02d" % (R.randrange(1900, 2100), R.randrange(1, 13), R.randrange(1, 29))
    if k == 5:
        return "".join(pick("０１２３４５６７８９") for _ in range(R.randrange(1, 8)))
    if k == 6:
        return pick(["²", "³", "½", "Ⅻ", "ⅷ", "①②③", "٣٤٥", "१२३", "๑๒", "𝟙𝟚", "〇〇七"])
    return str(R.randrange(100000))


def english_word():
    w = zipf_word(EN)
    k = R.randrange(40)
    if k == 0:
        w = w.upper()
    elif k == 1:
        w = w.capitalize()
    elif k == 2:
        w = w.capitalize() + zipf_word(EN).capitalize()  # CamelCase
    elif k == 3:
        w = w + pick(CONTRACTIONS)
    elif k == 4:
        w = w.upper() + pick(CONTRACTIONS)
    elif k == 5:
        w = number()
    return w


def english(n_sentences):
    out = []
    for _ in range(n_sentences):
        words = [english_word() for _ in range(R.randrange(3, 25))]
        words[0] = words[0][:1].upper() + words[0][1:]
        s = ""
        for i, w in enumerate(words):
            s += w
            if i + 1 < len(words):
                s += pick([" "] * 12 + [", ", "; ", " — ", " (", ") ", ": ", "  ", " \"", "\" "])
        s += pick([".", ".", ".", "!", "?", "...", ".\"", "?!", ":"])
        out.append(s)
        out.append(pick([" ", " ", " ", "\n", "\n\n", "  ", "\r\n", " \n"]))
    return "".join(out)


def identifier():
    parts = [zipf_word(EN).lower() for _ in range(R.randrange(1, 4))]
    style = R.randrange(4)
    if style == 0:
        return "_".join(parts)
    if style == 1:
        return parts[0] + "".join(p.capitalize() for p in parts[1:])
    if style == 2:
        return "".join(p.capitalize() for p in parts)
    return "_".join(parts).upper()


def code(n_lines):
    lines, depth = [], 0
    indent = pick(["  ", "    ", "\t", "        "])
    for _ in range(n_lines):
        k = R.randrange(12)
        ind = indent * depth
        if k == 0:
            lines.append(ind + "def %s(%s, %s=%s):" % (identifier(), identifier(), identifier(),
                                                     number()))
            depth = min(depth + 1, 6)
        elif k == 1:
            lines.append(ind + "for (int %s = 0; %s < %s; ++%s) {" % ("i", "i", identifier(), "i"))
            depth = min(depth + 1, 6)
        elif k == 2:
            depth = max(depth - 1, 0)
            lines.append(indent * depth + "}")
        elif k == 3:
            lines.append(ind + "%s = %s(%s) + %s  # %s" % (identifier(), identifier(),
                                                          identifier(), number(), english(1)))
        elif k == 4:
            lines.append(ind + json.dumps({identifier(): number(), identifier(): [R.random()]},
                                          ensure_ascii=R.random() < 0.5))
        elif k == 5:
            lines.append("")
        elif k == 6:
            lines.append(ind + "// " + english(1).strip() + " " * R.randrange(4))
        elif k == 7:
            lines.append(ind + "if (%s != nullptr && %s->%s() >= %s) return %s;" % (
                identifier(), identifier(), identifier(), number(), identifier()))
        elif k == 8:
            lines.append(ind + "std::vector<%s> %s{%s};" % (pick(["int", "float", "std::string"]),
                                                           identifier(), number()))
        elif k == 9:
            lines.append(ind + "print(f\"{%s!r:>10} %s\")" % (identifier(), english(1).strip()))
        elif k == 10:
            lines.append(ind + "https://example.com/%s?%s=%s&id=%s#%s" % (
                identifier(), identifier(), number(), number(), identifier()))
        else:
            lines.append(ind + "".join(pick(SYMBOLS) for _ in range(R.randrange(1, 8))))
    return pick(["\n", "\r\n"]).join(lines) + "\n"


def chinese(n):
    out = []
    for _ in range(n):
        out.append("".join(pick(HANZI) for _ in range(R.randrange(1, 30))))
        out.append(pick(CJK_PUNCT) if R.random() < 0.8 else pick([" ", "，", english_word(),
                                                                  number(), "\n"]))
    return "".join(out)


def japanese(n):
    out = []
    for _ in range(n):
        for _ in range(R.randrange(1, 6)):
            src = pick([HIRAGANA, KATAKANA, HANZI])
            out.append("".join(pick(src) for _ in range(R.randrange(1, 8))))
        out.append(pick("、。「」・ー！？ 　") if R.random() < 0.7 else number())
    return "".join(out)


def korean(n):
    out = []
    for _ in range(n):
        out.append("".join(chr(R.randrange(0xAC00, 0xD7A4)) for _ in range(R.randrange(1, 6))))
        out.append(pick([" ", " ", ". ", ", ", "? ", "\n", "ㅋㅋㅋ ", "각 "]))
    return "".join(out)


def arabic(n):
    letters = [chr(c) for c in range(0x0621, 0x064B)]
    marks = [chr(c) for c in range(0x064B, 0x0653)]
    out = []
    for _ in range(n):
        w = ""
        for _ in range(R.randrange(2, 8)):
            w += pick(letters)
            if R.random() < 0.3:
                w += pick(marks)
        out.append(w)
        out.append(pick([" ", " ", "، ", "؟ ", ". ", " ٣٤ ", "\n", " «" , "» "]))
    return "".join(out)


def indic_and_others(n):
    deva = [chr(c) for c in range(0x0915, 0x0939)]
    matras = [chr(c) for c in range(0x093E, 0x094D)] + ["\u094d", "\u0902"]
    thai = [chr(c) for c in range(0x0E01, 0x0E2F)] + ["\u0E31", "\u0E34", "\u0E48", "\u0E49"]
    out = []
    for _ in range(n):
        k = R.randrange(6)
        if k == 0:
            out.append("".join(pick(deva) + (pick(matras) if R.random() < 0.5 else "")
                               for _ in range(R.randrange(1, 6))))
        elif k == 1:
            out.append("".join(pick(thai) for _ in range(R.randrange(2, 12))))
        elif k == 2:
            out.append(pick(RU) if R.random() < 0.7 else pick(RU).upper() + pick(CONTRACTIONS))
        elif k == 3:
            out.append(pick(EL))
        elif k == 4:
            out.append(pick(HE))
        else:
            out.append(pick(["e\u0301", "\u0301abc", "a\u0300\u0300", "ǅemal", "ᾈδης", "ʰello",
                             "𝐀𝐁𝐂def", "ＡＢＣｄｅｆ", "ﬁnd", "ǈubljana", "ABCǅ", "x\u20dd",
                             "Ⅻth", "ǲ'S"]))
        out.append(pick([" ", " ", ", ", ". ", "\n", "\t"]))
    return "".join(out)


def emoji_text(n):
    out = []
    for _ in range(n):
        out.append(pick(EMOJI) * R.randrange(1, 3))
        out.append(pick([" ", "", english_word(), " " + english_word() + " ", "\n", "!", "中文"]))
    return "".join(out)


def whitespace_soup(n):
    out = []
    for _ in range(n):
        k = R.randrange(6)
        if k == 0:
            out.append(" " * R.randrange(1, 300))
        elif k == 1:
            out.append("".join(pick(SPACES) for _ in range(R.randrange(1, 12))))
        elif k == 2:
            out.append(pick(["\r\n" * R.randrange(1, 5), "\n" * R.randrange(1, 9), "\t\t\n  "]))
        elif k == 3:
            out.append(english_word())
        elif k == 4:
            out.append(pick(SYMBOLS) + pick(["\n", "\r\n", "\n\n", ""]))
        else:
            out.append(number())
    return "".join(out)


def special_names(vocab_base):
    names = {vocab_base + off: name for off, (name, _) in K3_NAMED_SPECIALS.items()}
    return [names.get(i, "<|reserved_token_%d|>" % i)
            for i in range(vocab_base, vocab_base + N_SPECIALS)]


def with_specials(vocab_base, n):
    names = special_names(vocab_base)
    tricky = ["<|end_of_msg|", "[BOS", "<|open|><|close|>", "[[EOS]]", "<|reserved_token_1|>",
              "<|reserved_token_%d|>" % (vocab_base + 100), "<|<|sep|>|>", "[UNK][PAD]",
              "<osagent_mode>x", " [EOT]\n"]
    out = []
    for _ in range(n):
        k = R.randrange(4)
        if k == 0:
            out.append(pick(names))
        elif k == 1:
            out.append(pick(tricky))
        elif k == 2:
            out.append(english(1))
        else:
            out.append(pick([" ", "\n", "中文", "'s", "  ", "\r\n"]))
    return "".join(out)


def unicode_sweep(flags):
    """Every run of code points with the same class bits, sampled at its ends and middle, in
    contexts that tell the classes apart."""
    cps = []
    table = runs(flags) + [(0x110000, 0)]
    for (start, _), (end, _) in zip(table, table[1:]):
        for cp in {start, end - 1, R.randrange(start, end)}:
            if not 0xD800 <= cp <= 0xDFFF:
                cps.append(cp)
    contexts = ["a{}b", "A{}", "{}a", " {}x", "1{}2", "中{}中", "{}{}{}", "'{}s", "x'{}", "!{}\n",
                "\n{}", " {} ", "Ab{}cD", "{}'S"]
    pieces = []
    for cp in sorted(cps):
        c = chr(cp)
        pieces.append(pick(contexts).replace("{}", c) + pick(contexts).replace("{}", c))
    return "".join(pieces)


def long_runs(vocab_base):
    """Cases for the 25,000-run and 400,000-char rules (§10.4)."""
    names = special_names(vocab_base)
    cases = [
        " " * 30_000,
        "x" + " " * 30_000 + "y",
        "start " + "a" * 30_000 + " end",
        "中" * 26_000,
        "ab" * 15_000 + "\n" + " \t" * 15_000 + "z",
        " " * 25_000 + "a",
        " " * 25_001 + "a",
        "q" * 25_000 + " " + "w" * 25_001,
        "\x1c" * 30_000 + "k",  # isspace() but not regex \s: cut as whitespace
        "1" * 60_000,
        "x" * 24_998 + names[0] + "tail",  # a special split by a 25,000 cut
        ("word " * 90_000)[:399_997] + names[2] + " after" + " more" * 5000,  # across 400,000
        "é" * 420_000,
    ]
    return cases


# ---------------------------------------------------------------------------------------------
# A small byte-level BPE trainer (incremental pair counts, heap with lazy deletion).

TRAIN_SPLIT = re.compile(r"'(?:[sStTmMdD]|[rRvV][eE]|[lL]{2})| ?[^\W\d_]+| ?\d{1,3}| ?[^\s\w]+[\r\n]*|\s+")


def byte_order():
    """Single-byte ranks in a printable-first order, so that rank != byte value."""
    first = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    return first + [b for b in range(256) if b not in first]


def train_bpe(text, n_merges):
    counts = {}
    for piece in TRAIN_SPLIT.findall(text):
        b = piece.encode("utf-8")
        counts[b] = counts.get(b, 0) + 1
    vocab = [bytes([b]) for b in byte_order()]
    rank_of = {tok: i for i, tok in enumerate(vocab)}
    words = [[rank_of[bytes([c])] for c in w] for w in counts]
    freq = list(counts.values())
    pair_count, pair_words = {}, {}
    for wi, w in enumerate(words):
        for a, b in zip(w, w[1:]):
            pair_count[(a, b)] = pair_count.get((a, b), 0) + freq[wi]
            pair_words.setdefault((a, b), set()).add(wi)
    heap = [(-c, p) for p, c in pair_count.items()]
    heapq.heapify(heap)
    merged = 0
    while merged < n_merges and heap:
        negc, pair = heapq.heappop(heap)
        if pair_count.get(pair, 0) != -negc or negc == 0:
            continue
        tok = vocab[pair[0]] + vocab[pair[1]]
        if tok in rank_of:
            pair_count[pair] = 0
            continue
        new = len(vocab)
        vocab.append(tok)
        rank_of[tok] = new
        merged += 1
        touched = {}
        for wi in list(pair_words.get(pair, ())):
            w = words[wi]
            for a, b in zip(w, w[1:]):
                pair_count[(a, b)] -= freq[wi]
                touched[(a, b)] = True
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == pair[0] and w[i + 1] == pair[1]:
                    out.append(new)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            words[wi] = out
            for a, b in zip(out, out[1:]):
                pair_count[(a, b)] = pair_count.get((a, b), 0) + freq[wi]
                pair_words.setdefault((a, b), set()).add(wi)
                touched[(a, b)] = True
        for p in touched:
            if pair_count[p] > 0:
                heapq.heappush(heap, (-pair_count[p], p))
    # Whole words no merge sequence reaches: exercise "the whole piece is a token" (§10.1 step 1).
    for extra in ["Привет", " qwxzv", "ﾃｽﾄ", " 🦀🦀", "zzzzzzzzzzzzzzzzzzzz"]:
        b = extra.encode("utf-8")
        if b not in rank_of:
            rank_of[b] = len(vocab)
            vocab.append(b)
    return vocab


# ---------------------------------------------------------------------------------------------
# K3's encode (tokenization_kimi.py `_encode_text_piece`), restated.

def cut_runs(s, limit):
    """Cuts s where a run of str.isspace() or of non-space chars would exceed `limit`."""
    if not s:
        return [""]
    pieces, start, run, in_space = [], 0, 0, s[0].isspace()
    for i, ch in enumerate(s):
        sp = ch.isspace()
        if sp != in_space:
            run, in_space = 1, sp
        else:
            run += 1
            if run > limit:
                pieces.append(s[start:i])
                start, run = i, 1
    pieces.append(s[start:])
    return pieces


def k3_encode(enc, text, allow_special):
    ids = []
    for i in range(0, len(text), MAX_SLICE_CHARS):
        for sub in cut_runs(text[i:i + MAX_SLICE_CHARS], MAX_RUN_CHARS):
            if allow_special:
                ids += enc.encode(sub, allowed_special="all")
            else:
                ids += enc.encode(sub, disallowed_special=())
    return ids


# ---------------------------------------------------------------------------------------------

def build_texts(vocab_base, flags):
    gens = [lambda: english(R.randrange(5, 60)), lambda: code(R.randrange(5, 80)),
            lambda: chinese(R.randrange(5, 60)), lambda: japanese(R.randrange(5, 60)),
            lambda: korean(R.randrange(5, 60)), lambda: arabic(R.randrange(5, 60)),
            lambda: indic_and_others(R.randrange(5, 60)), lambda: emoji_text(R.randrange(5, 40)),
            lambda: whitespace_soup(R.randrange(5, 60)),
            lambda: with_specials(vocab_base, R.randrange(5, 40))]
    texts = [unicode_sweep(flags)] + long_runs(vocab_base)
    total = sum(len(t.encode("utf-8")) for t in texts)
    while total < TARGET_BYTES:
        parts = [pick(gens)() for _ in range(R.randrange(1, 6))]
        t = "".join(parts)
        texts.append(t)
        total += len(t.encode("utf-8"))
    return texts


def decode_cases(enc, vocab_base, n):
    """Random id sequences, many splitting multi-byte characters or holding stray bytes."""
    probe = enc.encode("é中😀ä 한국어 👨‍👩‍👧 ﾃｽﾄ", disallowed_special=())
    cases = []
    for _ in range(n):
        ids = []
        for _ in range(R.randrange(1, 24)):
            k = R.randrange(4)
            if k == 0:
                ids.append(R.randrange(256))  # a single byte, often a lone continuation byte
            elif k == 1:
                ids.append(R.randrange(vocab_base + N_SPECIALS))
            else:
                ids.append(pick(probe))
        cases.append(ids)
    return cases


def write_fixture(vocab, texts, enc, vocab_base):
    os.makedirs(OUT_DIR, exist_ok=True)
    import base64
    with open(os.path.join(OUT_DIR, "tiktoken.model"), "w") as f:
        for rank, tok in enumerate(vocab):
            f.write("%s %d\n" % (base64.b64encode(tok).decode("ascii"), rank))
    decoder = {}
    for off, (name, special) in K3_NAMED_SPECIALS.items():
        decoder[str(vocab_base + off)] = {"content": name, "lstrip": False, "normalized": False,
                                          "rstrip": False, "single_word": False,
                                          "special": special}
    config = {
        "added_tokens_decoder": decoder,
        "additional_special_tokens": ["<|end_of_msg|>", "[start_header_id]", "[end_header_id]",
                                      "[EOT]", "<|media_begin|>", "<|media_content|>",
                                      "<|media_end|>", "<|media_pad|>", "<osagent_mode>"],
        "bos_token": "[BOS]", "eos_token": "[EOS]", "unk_token": "[UNK]", "pad_token": "[PAD]",
        "model_max_length": 1048576, "tokenizer_class": "TikTokenTokenizer",
    }
    with open(os.path.join(OUT_DIR, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")

    records = []
    n_ids = n_bytes = 0
    for i, text in enumerate(texts):
        both = i % 7 == 0 or "<|" in text or "[" in text
        ids = [k3_encode(enc, text, True)] + ([k3_encode(enc, text, False)] if both else [])
        for seq in ids:
            assert enc.decode(seq) == text
            n_ids += len(seq)
        n_bytes += len(text.encode("utf-8"))
        records.append((1 if both else 0, text.encode("utf-8"), ids))
    for ids in decode_cases(enc, vocab_base, 3000):
        records.append((2, enc.decode(ids).encode("utf-8"), [ids]))
    # Three sections (case table, all text, all ids) compress better than interleaved records.
    table, text_blob, id_blob = bytearray(), bytearray(), bytearray()
    for kind, data, id_lists in records:
        table += struct.pack("<BI", kind, len(data))
        text_blob += data
        for ids in id_lists:
            table += struct.pack("<I", len(ids))
            id_blob += struct.pack("<%dI" % len(ids), *ids)
    blob = b"K3TOKFX1" + struct.pack("<I", len(records)) + table + text_blob + id_blob
    packed = lzma.compress(bytes(blob), preset=9 | lzma.PRESET_EXTREME)
    with open(os.path.join(OUT_DIR, "cases.bin.xz"), "wb") as f:
        f.write(packed)
    print("encode cases: %d bytes of text, %d ids (both modes); cases.bin %d bytes, xz %d bytes"
          % (n_bytes, n_ids, len(blob), len(packed)))


def main():
    flags = class_flags()
    vocab_base_guess = 6260  # only names reserved specials in generated text; fixed below
    texts = build_texts(vocab_base_guess, flags)
    vocab = train_bpe("".join(texts[20:400]), N_MERGES)
    vocab_base = len(vocab)
    if vocab_base != vocab_base_guess:
        sys.exit("vocab_base %d != %d: adjust vocab_base_guess" % (vocab_base, vocab_base_guess))
    specials = {name: vocab_base + i for i, name in enumerate(special_names(vocab_base))}
    enc = tiktoken.Encoding(name="k3-fixture", pat_str=K3_PATTERN,
                            mergeable_ranks={tok: r for r, tok in enumerate(vocab)},
                            special_tokens=specials)
    write_fixture(vocab, texts, enc, vocab_base)


if __name__ == "__main__":
    main()
