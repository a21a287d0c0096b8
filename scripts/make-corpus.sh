#!/usr/bin/env bash
# Builds the English training corpus for K3's default model from Debian packages, and a
# held-out modern-English set from the fortune-cookie databases that never enters training.
#
#   scripts/make-corpus.sh [OUT_DIR]        (default: data/corpus in the repository; gitignored)
#
# Writes OUT_DIR/train.txt, OUT_DIR/late.txt (the mixture for the end of a schedule, below),
# OUT_DIR/heldout.txt and OUT_DIR/SOURCES (package versions and
# sizes). Packages are fetched with `apt-get download` and unpacked with dpkg-deb under
# OUT_DIR/debs and OUT_DIR/root: nothing is installed. Re-running reuses what is there and
# rebuilds the same files (deterministic order). Paragraphs are deduplicated across every
# source, and any paragraph sharing a line with the held-out set is dropped.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$repo/data/corpus}"
mkdir -p "$out/debs" "$out/root" "$out/parts"
out="$(cd "$out" && pwd)"
py="$repo/scripts/corpus_text.py"

# Training sources: package, text kind, file pattern (find -path) under the unpacked package,
# and optionally a pattern to leave out (linux-doc's translations are not English).
sources=(
  "linux-doc-6.1 rst */Documentation/*.rst.gz */Documentation/translations/*"
  "python3.11-doc rst */html/_sources/*.txt"
  "perl-doc pod */pod/*.pod"
  "git-doc plain */git-doc/*.txt"
  "debian-reference-en plain */debian-reference*.txt.gz"
  "gnu-standards plain */*.text.gz"
  "jargon info */info/*.info*.gz"
  "autoconf-doc info */info/*.info*.gz"
  "coreutils info */info/*.info*.gz"
  "grep info */info/*.info*.gz"
  "sed info */info/*.info*.gz"
  "findutils info */info/*.info*.gz"
  "gzip info */info/*.info*.gz"
  "wget info */info/*.info*.gz"
  "bash-doc info */info/*.info*.gz"
  "diffutils-doc html */diffutils/*.html"
  "debian-handbook html */html/en-US/*.html"
  "r-cran-janeaustenr rdata */janeaustenr/data/Rdata.rdb"
  "r-cran-tokenizers rdata */tokenizers/data/Rdata.rdb"
  "dict-devil plain */dictd/devil.dict.dz"
  "wordnet-base wordnet */wordnet/data.*"
  "cataclysm-dda-data gamejson *.json"
  "endless-sky-data gamescript */data/*.txt"
  "crawl-common crawldb */dat/descript/*.txt */dat/descript/*/*"
  "wesnoth-1.16-data wml *.cfg"
  "sword-text-web sword */engWEB2015eb/*.bzs"
  "rust-doc html */html/book/*.html */print.html"
  "dict-foldoc plain */dictd/foldoc.dict.dz"
  "debian-policy plain */debian-policy/policy.txt.gz"
  "developers-reference plain */developers-reference.txt.gz"
  "maint-guide html */html/*.en.html"
)
# Wesnoth's campaigns, one package each: their dialogue and stories.
wesnoth_campaigns=(did dm dw ei httt l low nr sof sota sotbe thot trow tsg ttb utbs)
for c in "${wesnoth_campaigns[@]}"; do sources+=("wesnoth-1.16-$c wml *.cfg"); done
# The English strings of four more games (Naev's missions and dialogue, FreedroidRPG's dialogue,
# Warzone 2100's briefings, Freeciv's help and nations' histories): in late.txt only (below);
# last in the list, so train.txt is the text the shipped model was trained on.
late_only=(naev-data freedroidrpg-data warzone2100-data freeciv-data)
sources+=("naev-data gettext */gettext/*/LC_MESSAGES/naev.mo"
  "freedroidrpg-data gettext */locale/*/LC_MESSAGES/freedroidrpg*.mo"
  "warzone2100-data gettext */locale/*/LC_MESSAGES/warzone2100.mo"
  "freeciv-data gettext */locale/*/LC_MESSAGES/freeciv-*.mo")
# Mixture weights (default 1): the general English of novels, Bierce's dictionary and the
# games' prose (Cataclysm: DDA's descriptions and dialogue, Endless Sky's conversations, Dungeon
# Crawl's descriptions and quotations, Wesnoth's campaigns) is a small part of the text next to
# the manuals, and is what the held-out fortunes read like, so each paragraph of it is written
# this many times.
general=(r-cran-janeaustenr r-cran-tokenizers dict-devil cataclysm-dda-data endless-sky-data
  crawl-common wesnoth-1.16-data "${late_only[@]}")
for c in "${wesnoth_campaigns[@]}"; do general+=("wesnoth-1.16-$c"); done
declare -A weights late_weights
for pkg in "${general[@]}"; do weights[$pkg]=3; done
for pkg in "${late_only[@]}"; do weights[$pkg]=0; done
# late.txt, the mixture for the end of a schedule (a continuation at a low learning rate): the
# same paragraphs with the manuals cut to a quarter, the dictionaries and Bibles to half and
# the general English kept at three times, so about two thirds of it reads like the fortunes.
for s in "${sources[@]}"; do late_weights[${s%% *}]=0.25; done
for pkg in "${general[@]}"; do late_weights[$pkg]=3; done
late_weights[jargon]=1
for pkg in wordnet-base sword-text-web bible-kjv; do late_weights[$pkg]=0.5; done
heldout_packages=(fortunes fortunes-min)
bible_packages=(bible-kjv bible-kjv-text)

all_packages() {
  for s in "${sources[@]}"; do echo "${s%% *}"; done
  printf '%s\n' "${bible_packages[@]}" "${heldout_packages[@]}"
}

# Fetch and unpack each package once.
fetch() {
  local pkg="$1"
  if ! ls "$out/debs/${pkg}_"*.deb >/dev/null 2>&1; then
    if ! apt-cache show "$pkg" >/dev/null 2>&1; then
      echo "make-corpus: package lists lack $pkg; running apt-get update" >&2
      apt-get update -qq
    fi
    (cd "$out/debs" && apt-get download -qq "$pkg" 2>/dev/null) ||
      { echo "make-corpus: cannot download $pkg (apt-get download $pkg)" >&2; exit 1; }
  fi
  if [ ! -e "$out/root/$pkg/.unpacked" ]; then
    rm -rf "$out/root/$pkg"
    mkdir -p "$out/root/$pkg"
    dpkg-deb -x "$out/debs/${pkg}_"*.deb "$out/root/$pkg"
    touch "$out/root/$pkg/.unpacked"
  fi
}

for pkg in $(all_packages); do fetch "$pkg"; done

# One text part per source.
for s in "${sources[@]}"; do
  read -r pkg kind pattern exclude <<<"$s"
  mapfile -t files < <(find "$out/root/$pkg" -type f -path "$pattern" ! -path "${exclude:-/-nothing-/*}" |
    LC_ALL=C sort)
  if [ "${#files[@]}" -eq 0 ]; then
    echo "make-corpus: no files match $pattern in $pkg" >&2
    exit 1
  fi
  python3 "$py" extract "$kind" "$out/parts/$pkg.txt" "${files[@]}"
done

# The King James Bible through its own reader: one paragraph per chapter, verse numbers removed.
bible="$out/root/bible-kjv/usr/bin/bible"
"$bible" -p "$out/root/bible-kjv-text/usr/lib" -l 100000 "Gen1:1-Rev22:21" </dev/null |
  sed -E 's/^ +[0-9]+ //' >"$out/parts/bible-kjv.txt"

# Held-out: every fortune database (the index .dat files and .u8 links left out).
mapfile -t fortune_files < <(for p in "${heldout_packages[@]}"; do
  find "$out/root/$p/usr/share/games/fortunes" -type f ! -name '*.dat' ! -name '*.u8'
done | LC_ALL=C sort)
python3 "$py" fortunes "$out/heldout.txt.tmp" "${fortune_files[@]}"
mv "$out/heldout.txt.tmp" "$out/heldout.txt"

parts=() late_parts=()
for s in "${sources[@]}"; do
  pkg=${s%% *}
  parts+=("$out/parts/$pkg.txt@${weights[$pkg]:-1}")
  late_parts+=("$out/parts/$pkg.txt@${late_weights[$pkg]}")
done
parts+=("$out/parts/bible-kjv.txt")
late_parts+=("$out/parts/bible-kjv.txt@${late_weights[bible-kjv]}")
python3 "$py" merge "$out/train.txt.tmp" "$out/heldout.txt" "${parts[@]}"
mv "$out/train.txt.tmp" "$out/train.txt"
python3 "$py" merge "$out/late.txt.tmp" "$out/heldout.txt" "${late_parts[@]}"
mv "$out/late.txt.tmp" "$out/late.txt"

{
  echo "# package version bytes-of-text-extracted"
  for pkg in $(all_packages); do
    deb=$(ls "$out/debs/${pkg}_"*.deb)
    ver=$(dpkg-deb -f "$deb" Version)
    part="$out/parts/$pkg.txt"
    echo "$pkg $ver $([ -f "$part" ] && wc -c <"$part" || echo -)"
  done
} >"$out/SOURCES"

echo "make-corpus: $out"
printf '  train.txt    %12d bytes %10d lines\n' "$(wc -c <"$out/train.txt")" "$(wc -l <"$out/train.txt")"
printf '  late.txt     %12d bytes %10d lines\n' "$(wc -c <"$out/late.txt")" "$(wc -l <"$out/late.txt")"
printf '  heldout.txt  %12d bytes %10d lines\n' "$(wc -c <"$out/heldout.txt")" "$(wc -l <"$out/heldout.txt")"
