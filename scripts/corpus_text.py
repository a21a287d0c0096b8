#!/usr/bin/env python3
"""Text extraction and deduplication for scripts/make-corpus.sh (standard library only).

  corpus_text.py extract KIND OUT.txt FILE...   one source's files, in the order given, as text
  corpus_text.py fortunes OUT.txt FILE...       fortune databases ('%' lines between entries)
  corpus_text.py merge TRAIN.txt HELDOUT.txt PART.txt...
      paragraph-level exact dedup across all parts (whitespace-normalised), drops paragraphs
      that are mostly not prose, and drops any paragraph that shares a run of 8 words (case
      and punctuation ignored, however the lines wrap) with the held-out text, so no held-out
      sentence reaches training.

KIND is one of rst, pod, info, html, plain. Files may be gzip-compressed (.gz)."""
import gzip
import html.parser
import re
import sys


def read(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        return f.read().decode("utf-8", errors="replace")


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


CLEAN = {"rst": clean_rst, "pod": clean_pod, "info": clean_info, "html": clean_html,
         "plain": lambda t: t}
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def normalise(t):
    t = CONTROL.sub("", t.replace("\r\n", "\n").replace("\r", "\n"))
    lines = [l.rstrip() for l in t.split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip() + "\n"


def extract(kind, out, files):
    with open(out, "w", encoding="utf-8") as f:
        for path in files:
            f.write(normalise(CLEAN[kind](read(path))) + "\n")


def fortunes(out, files):
    seen, entries = set(), []
    for path in files:
        for e in re.split(r"\n%\n", read(path).replace("\r", "")):
            e = normalise(e.strip("%\n"))
            key = " ".join(e.split())
            if len(key) >= 10 and key not in seen:
                seen.add(key)
                entries.append(e)
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(entries))


def prose_like(p):
    letters = sum(c.isalpha() or c == " " for c in p)
    return len(p) >= 40 and letters >= 0.7 * len(p)


WORD = re.compile(r"\w+")
SHINGLE = 8


def shingles(text):
    w = WORD.findall(text.lower())
    return {" ".join(w[i:i + SHINGLE]) for i in range(len(w) - SHINGLE + 1)}


def merge(train, heldout, parts):
    held = shingles(read(heldout))
    seen, kept, dropped_dup, dropped_held, dropped_other = set(), 0, 0, 0, 0
    with open(train, "w", encoding="utf-8") as f:
        for part in parts:
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
                f.write(p.strip("\n") + "\n\n")
                kept += 1
    print(f"paragraphs: {kept} kept, {dropped_dup} duplicates, {dropped_held} sharing {SHINGLE} "
          f"words with the held-out text, {dropped_other} not prose", file=sys.stderr)


def main(argv):
    if len(argv) >= 4 and argv[1] == "extract" and argv[2] in CLEAN:
        extract(argv[2], argv[3], argv[4:])
    elif len(argv) >= 3 and argv[1] == "fortunes":
        fortunes(argv[2], argv[3:])
    elif len(argv) >= 4 and argv[1] == "merge":
        merge(argv[2], argv[3], argv[4:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
