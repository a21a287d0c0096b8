#!/usr/bin/env python3
"""Text extraction and deduplication for scripts/make-corpus.sh (standard library only).

  corpus_text.py extract KIND OUT.txt FILE...   one source's files, in the order given, as text
  corpus_text.py fortunes OUT.txt FILE...       fortune databases ('%' lines between entries)
  corpus_text.py merge TRAIN.txt HELDOUT.txt PART.txt...
      paragraph-level exact dedup across all parts (whitespace-normalised), drops paragraphs
      that are mostly not prose, and drops any paragraph that shares a run of 8 words (case
      and punctuation ignored, however the lines wrap) with the held-out text, so no held-out
      sentence reaches training.

  A part given as PART.txt@N is written N times (its paragraphs repeated in place): a mixture
  weight, so text unlike the bulk of the corpus is not drowned by it. A fractional N (0.3, 2.5)
  writes the fraction's share of the paragraphs once more, chosen by a hash of each paragraph,
  so the same paragraphs are chosen on every run; @0 keeps a part's paragraphs out (still
  deduplicated against the parts after it).

KIND is one of rst, pod, info, html, plain, rdata (the strings of an R lazy-load database,
R/site-library/*/data/Rdata.rdb: one line each), wordnet (WordNet data.* files: each synset's
words and gloss), gamejson (Cataclysm: DDA's JSON: the prose of its descriptions, notes and
dialogue), gamescript (Endless Sky's data files: its conversations and descriptions) and
crawldb (Dungeon Crawl's text databases: '%%%%'-separated entries), wml (Wesnoth's
translatable strings: its campaigns' dialogue and stories) and sword (a SWORD zText Bible
module, given its ot.bzs / nt.bzs indexes) and gettext (a program's English source strings: the
msgids of its .mo catalogues and .po/.pot templates, each string once however many catalogues
carry it). Files may be gzip-compressed (.gz, or dictzip .dz)."""
import bz2
import gzip
import html.parser
import lzma
import re
import struct
import sys
import zlib


def read_bytes(path):
    opener = gzip.open if path.endswith((".gz", ".dz")) else open
    with opener(path, "rb") as f:
        return f.read()


def read(path):
    return read_bytes(path).decode("utf-8", errors="replace")


ROLE = re.compile(r":[a-z:+-]+:`([^`<]*?)(?:\s*<[^>]*>)?`")
RULE = re.compile(r"^\s*([=\-~^\"'`#*+.:_])\1{3,}\s*$")


def clean_rst(t):
    out = []
    for line in t.splitlines():
        if RULE.match(line) or line.startswith(".. ") or line.strip().startswith(":"):
            continue
        line = ROLE.sub(r"\1", line).replace("``", "").replace("**", "")
        out.append(line)
    return "\n".join(out)


POD_CODE = re.compile(r"[A-Z]<+\s*([^<>]*?)\s*>+")


def clean_pod(t):
    out = []
    for line in t.splitlines():
        if line.startswith("=cut") or line.startswith("=begin") or line.startswith("=end"):
            continue
        if line.startswith("=head") or line.startswith("=item"):
            line = line.split(" ", 1)[1] if " " in line else ""
        elif line.startswith("="):
            continue
        out.append(POD_CODE.sub(r"\1", line))
    return "\n".join(out)


def clean_info(t):
    out = []
    for line in t.split("\n"):
        if line.startswith("\x1f") or line.startswith("File: ") or line.startswith("* Menu:"):
            continue
        if line.startswith("* ") and "::" in line:  # menu entries
            continue
        if RULE.match(line):
            continue
        out.append(line.replace("\x1f", "").replace("\x7f", ""))
    return "\n".join(out)


class HtmlText(html.parser.HTMLParser):
    BLOCK = {"p", "div", "br", "li", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "pre", "dd", "dt"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts, self.skip = [], 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self.skip += 1
        if tag in self.BLOCK:
            self.parts.append("\n\n")

    def handle_endtag(self, tag):
        if tag in ("script", "style") and self.skip:
            self.skip -= 1

    def handle_data(self, data):
        if not self.skip:
            self.parts.append(data)


def clean_html(t):
    p = HtmlText()
    p.feed(t)
    return "".join(p.parts)


def rdb_records(blob):
    """The serialized objects of an R lazy-load database: each one is a 4-byte big-endian length,
    then a zlib stream, or a type byte ('Z' bzip2, 'X' xz, '0' none) and that stream."""
    i = 0
    while i + 5 <= len(blob):
        kind = blob[i + 4:i + 5]
        if kind in (b"Z", b"X"):
            d = bz2.BZ2Decompressor() if kind == b"Z" else lzma.LZMADecompressor()
            yield d.decompress(blob[i + 5:])
        elif kind == b"0":
            n = struct.unpack(">I", blob[i:i + 4])[0]
            d = None
            yield blob[i + 5:i + 5 + n]
            i += 5 + n
            continue
        else:
            d = zlib.decompressobj()
            yield d.decompress(blob[i + 4:])
        i = len(blob) - len(d.unused_data)


def xdr_strings(obj):
    """Every CHARSXP (type 9: flags, length, bytes) of one XDR-serialized R object, in order."""
    if not obj.startswith(b"X\n"):
        return
    i = 14  # "X\n", then the format version and two R versions
    if struct.unpack(">i", obj[2:6])[0] >= 3:  # then the native encoding's name
        i += 4 + struct.unpack(">i", obj[14:18])[0]
    while i + 8 <= len(obj):
        flags, n = struct.unpack(">iI", obj[i:i + 8])
        if flags & 0xFF == 9 and n != 0xFFFFFFFF and i + 8 + n <= len(obj):
            yield obj[i + 8:i + 8 + n].decode("utf-8", errors="replace")
            i += 8 + n
        else:
            i += 4


def rdata_text(path):
    """An R package's text data (novels stored one line per string): the lines in order."""
    lines = []
    for obj in rdb_records(read_bytes(path)):
        lines.extend(xdr_strings(obj))
        lines.append("")
    return "\n".join(lines)


WN_GLOSS = re.compile(r"\|\s*(.*?)\s*$")


def wordnet_text(path):
    """WordNet synsets as 'word, word: gloss; "example"' lines, eight to a paragraph."""
    out = []
    for line in read(path).splitlines():
        if line.startswith("  ") or "|" not in line:  # the licence header
            continue
        fields = line.split(" ")
        count = int(fields[3], 16)
        words = [fields[4 + 2 * j].replace("_", " ") for j in range(count)]
        words = [re.sub(r"\([a-z]+\)$", "", w) for w in words]
        out.append(", ".join(words) + ": " + WN_GLOSS.search(line).group(1))
        if len(out) % 9 == 8:
            out.append("")
    return "\n".join(out)


# Game placeholders, filled with one plausible word so the sentences read as English.
FILL = {"planet": "Earth", "destination": "Mars", "origin": "Earth", "system": "Sol",
        "payment": "50,000 credits", "npc": "the pirate", "cargo": "ten tons of food",
        "commodity": "food", "bunks": "four", "date": "the fifth", "last": "Smith",
        "first": "Sam", "passengers": "three passengers", "tons": "ten tons", "ship": "ship",
        "npcname": "Sam", "name_g": "Sam", "name_b": "Alex", "given_name": "Sam",
        "full_name": "Sam Smith", "family_name": "Smith", "city": "the city",
        "the_cataclysm": "the Cataclysm", "zombies": "zombies", "swear": "damn",
        "mypronoun": "I", "very": "very", "really": "really", "okay": "okay"}
PLACEHOLDER = re.compile(r"</?([A-Za-z_ ]*)>")


def fill_placeholders(text):
    """Markup (<color_red>, </info>) is dropped; named placeholders get a plain word."""
    return PLACEHOLDER.sub(lambda m: FILL.get(m.group(1), ""), text)


# The keys of Cataclysm's JSON whose strings are prose (maps, ASCII art and comments are not).
GAME_PROSE_KEYS = {"description", "text", "dynamic_line", "messages", "offer", "advice", "desc",
                   "success", "yes", "no", "info", "accepted", "rejected", "job_description",
                   "detailed_definition", "message", "failure", "describe"}


def gamejson_text(path):
    import json
    out = []

    def walk(o, key):
        if isinstance(o, dict):
            for k, v in o.items():
                walk(v, k)
        elif isinstance(o, list):
            for v in o:
                walk(v, key)
        elif isinstance(o, str) and key in GAME_PROSE_KEYS and o.count(" ") >= 3:
            out.append(fill_placeholders(o).replace("\\n", "\n"))

    try:
        walk(json.loads(read(path)), None)
    except ValueError:
        return ""
    return "\n\n".join(short_lines_joined(out))


def short_lines_joined(texts, min_chars=200):
    """Consecutive short strings (a line of dialogue, its answers) as one paragraph of lines."""
    paragraphs, current = [], []
    for t in texts:
        current.append(t.strip())
        if sum(len(c) for c in current) >= min_chars:
            paragraphs.append("\n".join(current))
            current = []
    if current:
        paragraphs.append("\n".join(current))
    return paragraphs


GAME_LINE = re.compile(r'^\s*(?:`(.*)`|(?:description|"description")\s+"(.*)")\s*$')


def gamescript_text(path):
    """Backquoted lines (conversations) and description lines; a block of them is a paragraph."""
    out = []
    for line in read(path).splitlines():
        m = GAME_LINE.match(line)
        text = (m.group(1) if m and m.group(1) is not None else m.group(2) if m else "")
        text = fill_placeholders(text.strip())
        if text.count(" ") >= 2:
            out.append(text)
        elif out and out[-1]:
            out.append("")
    return "\n\n".join(p for p in "\n".join(out).split("\n\n") if p)


def crawldb_text(path):
    """Entries between '%%%%' lines: a key line, then text; links to other entries left out."""
    out = []
    for entry in read(path).split("%%%%"):
        lines = entry.strip("\n").split("\n")
        body = "\n".join(lines[1:]).strip()
        if body and not (body.startswith("<") and body.endswith(">")) and body.count(" ") >= 3:
            out.append(fill_placeholders(body))
    return "\n\n".join(out)


WML_STRING = re.compile(r'_\s*"((?:[^"]|"")*)"', re.S)
WML_LINK = re.compile(r"<(\w+)>[^<]*?\btext='([^']*)'[^<]*</\1>")  # help links: their text
WML_MARKUP = re.compile(r"</?\w+[^>]*>")


def wml_text(path):
    """Wesnoth's translatable strings (_ "..."): its dialogue, stories and descriptions. Strings
    that name a variable or macro ($unit.name, {MACRO}) are left out, not guessed at."""
    out = []
    for m in WML_STRING.finditer(read(path)):
        text = WML_LINK.sub(r"\2", m.group(1).replace('""', '"'))
        text = WML_MARKUP.sub("", text).strip()
        if text.count(" ") >= 4 and "$" not in text and "{" not in text:
            out.append(text)
    return "\n\n".join(short_lines_joined(out))


def mo_msgids(blob):
    """The source strings of a GNU .mo catalogue (its original-strings table; a context before
    \x04 and the plural form after \x00 are dropped)."""
    order = "<" if struct.unpack_from("<I", blob)[0] == 0x950412DE else ">"
    count, table = struct.unpack_from(order + "II", blob, 8)
    for i in range(count):
        length, offset = struct.unpack_from(order + "II", blob, table + 8 * i)
        raw = blob[offset:offset + length].split(b"\x00")[0].split(b"\x04")[-1]
        yield raw.decode("utf-8", errors="replace")


PO_ENTRY = re.compile(r'^msgid\s+((?:"(?:[^"\\]|\\.)*"\s*)+)', re.M)
PO_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}


def po_msgids(text):
    for m in PO_ENTRY.finditer(text):
        parts = re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1))
        yield re.sub(r"\\(.)", lambda e: PO_ESCAPES.get(e.group(1), ""), "".join(parts))


# Format placeholders (%s, %d, %.1f, {player}, $n) get a plain word; colour codes (#r … #0,
# \x07r … \x070) and BBCode ([b] … [/b]) go; a string still holding code-like bits (%c, nil, ::, _, ()) is a program
# message, not prose, and is left out.
FORMAT_WORDS = [(re.compile(r"\{player\}|%\d*\$?s"), "Sam"), (re.compile(r"%[-+ 0#]*\d*(?:\.\d+)?[dif]"), "ten"),
                (re.compile(r"\{[^{}]*\}|\$\w+"), "it"), (re.compile(r"[#\x07][a-zA-Z0-9](?=\S)|[#\x07][0n]|\[/?[a-z]+\]"), "")]
CODE_LIKE = re.compile(r"%|\x07|\bnil\b|::|_|\(\)|#include")


def gettext_strings(files):
    """English source strings of every catalogue, each once, in first-seen order."""
    seen = {}
    for path in files:
        strings = (mo_msgids(read_bytes(path)) if path.endswith(".mo") else po_msgids(read(path)))
        for s in strings:
            seen.setdefault(s, None)
    out = []
    for s in seen:
        if s.startswith("?"):  # freeciv's "?female:" qualifiers mark name variants, not prose
            continue
        for pattern, word in FORMAT_WORDS:
            s = pattern.sub(word, s)
        s = WML_MARKUP.sub("", s).strip()
        if s.count(" ") >= 3 and not CODE_LIKE.search(s):
            out.append(s)
    return "\n\n".join(short_lines_joined(out))


OSIS_NOTE = re.compile(r"<note\b.*?</note>", re.S)
OSIS_BREAK = re.compile(r'<div\b[^>]*\bsID="[^"]*"[^>]*type="x-p"[^>]*/>|<chapter\b[^>]*\bsID=[^>]*/>')
OSIS_LINE = re.compile(r"<l\b[^>]*\bsID=[^>]*/>|</title>|<lb\b[^>]*/>")


def sword_text(path):
    """A SWORD zText Bible module (ot.bzs beside ot.bzz): its zlib blocks in order, OSIS markup
    read as paragraphs (x-p divisions, chapters) and poetry lines, footnotes left out."""
    import struct
    index = read_bytes(path)
    with open(path[:-1] + "z", "rb") as f:
        blocks = f.read()
    text = []
    for i in range(len(index) // 12):
        offset, size, _ = struct.unpack_from("<III", index, 12 * i)
        text.append(zlib.decompress(blocks[offset:offset + size]).decode("utf-8", errors="replace"))
    t = OSIS_NOTE.sub("", "".join(text))
    t = OSIS_LINE.sub("\x01", OSIS_BREAK.sub("\n\n", t))  # a title then a line: one break
    t = re.sub(r"\s*\x01[\s\x01]*", "\n", re.sub(r"<[^>]*>", "", t))
    return "\n\n".join(re.sub(r" *\n *", "\n", p).strip() for p in t.split("\n\n"))


CLEAN = {"rst": clean_rst, "pod": clean_pod, "info": clean_info, "html": clean_html,
         "plain": lambda t: t}
READ = {"rdata": rdata_text, "wordnet": wordnet_text, "gamejson": gamejson_text,
        "gamescript": gamescript_text, "crawldb": crawldb_text, "wml": wml_text,
        "sword": sword_text}
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def normalise(t):
    t = CONTROL.sub("", t.replace("\r\n", "\n").replace("\r", "\n"))
    lines = [l.rstrip() for l in t.split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip() + "\n"


def extract(kind, out, files):
    with open(out, "w", encoding="utf-8") as f:
        if kind == "gettext":  # strings shared by many catalogues: all files at once
            f.write(normalise(gettext_strings(files)) + "\n")
            return
        for path in files:
            text = READ[kind](path) if kind in READ else CLEAN[kind](read(path))
            f.write(normalise(text) + "\n")


def fortune_entries(files):
    """(file, entry) of fortune databases in order, each entry once (scripts/heldout-by-file.py
    maps the held-out text back to its files through this)."""
    seen = set()
    for path in files:
        for e in re.split(r"\n%\n", read(path).replace("\r", "")):
            e = normalise(e.strip("%\n"))
            key = " ".join(e.split())
            if len(key) >= 10 and key not in seen:
                seen.add(key)
                yield path, e


def fortunes(out, files):
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(e for _, e in fortune_entries(files)))


def prose_like(p):
    letters = sum(c.isalpha() or c == " " for c in p)
    return len(p) >= 40 and letters >= 0.7 * len(p)


WORD = re.compile(r"\w+")
SHINGLE = 8


def shingles(text):
    w = WORD.findall(text.lower())
    return {" ".join(w[i:i + SHINGLE]) for i in range(len(w) - SHINGLE + 1)}


def copies_of(key, weight):
    """A paragraph's copies under a mixture weight: its whole part, and one more for the
    fraction's share of paragraphs (chosen by a hash of the text, the same on every run)."""
    whole = int(weight)
    share = zlib.crc32(key.encode("utf-8")) / 2**32
    return whole + (share < weight - whole)


def merge(train, heldout, parts):
    held = shingles(read(heldout))
    seen, kept, dropped_dup, dropped_held, dropped_other = set(), 0, 0, 0, 0
    with open(train, "w", encoding="utf-8") as f:
        for spec in parts:
            part, _, weight = spec.partition("@")
            for p in read(part).split("\n\n"):
                key = " ".join(p.split())
                if not prose_like(key):
                    dropped_other += 1
                    continue
                if key in seen:
                    dropped_dup += 1
                    continue
                seen.add(key)
                if not held.isdisjoint(shingles(key)):
                    dropped_held += 1
                    continue
                copies = copies_of(key, float(weight or 1))
                f.write((p.strip("\n") + "\n\n") * copies)
                kept += copies > 0
    print(f"paragraphs: {kept} kept, {dropped_dup} duplicates, {dropped_held} sharing {SHINGLE} "
          f"words with the held-out text, {dropped_other} not prose", file=sys.stderr)


def main(argv):
    if len(argv) >= 4 and argv[1] == "extract" and (argv[2] in CLEAN or argv[2] in READ or
                                                    argv[2] == "gettext"):
        extract(argv[2], argv[3], argv[4:])
    elif len(argv) >= 3 and argv[1] == "fortunes":
        fortunes(argv[2], argv[3:])
    elif len(argv) >= 4 and argv[1] == "merge":
        merge(argv[2], argv[3], argv[4:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
