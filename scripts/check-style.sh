#!/usr/bin/env bash
# Style budgets (DESIGN.md rule 14-15): C++ files under 800 lines, tools/ on the public API only
# (no src/ includes), and clang-format clean when clang-format is installed. Prints the largest
# files; fails past the budget.
set -euo pipefail
cd "$(dirname "$0")/.."
BUDGET=800
# Tracked files still on disk (a file deleted but not yet staged is skipped).
files=$(git ls-files '*.cpp' '*.h' | grep -v 'src/tokenizer/unicode_tables.cpp' |
  while IFS= read -r f; do if [ -f "$f" ]; then echo "$f"; fi; done)
echo "largest C++ files (budget $BUDGET lines):"
wc -l $files | sort -n | grep -v ' total$' | tail -5
over=$(wc -l $files | grep -v ' total$' | awk -v b="$BUDGET" '$1 > b {print $2}')
if [ -n "$over" ]; then
  echo "check-style: over the $BUDGET-line budget: $over" >&2
  exit 1
fi
# Tools use the public API only: every #include "..." in a file under tools/ must resolve to a
# public header (include/k3/...) or to a file under tools/ (beside the includer, or from tools/),
# never to src/. Angle-bracket includes are system and third-party headers.
root=$(pwd -P)
leaks=""
while IFS= read -r f; do
  dir=$(dirname "$f")
  while IFS= read -r inc; do
    ok=""
    for cand in "$dir/$inc" "tools/$inc" "include/$inc"; do  # the compiler's search order
      [ -f "$cand" ] || continue
      real=$(realpath -m "$cand")
      case "$real" in
        "$root"/include/k3/* | "$root"/tools/*) ok=1 ;;
      esac
      break  # the first match is what the compiler opens
    done
    [ -n "$ok" ] || leaks+="  $f: #include \"$inc\""$'\n'
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done < <(find tools -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.hpp' \) | sort)
if [ -n "$leaks" ]; then
  printf 'check-style: tools/ may include only k3/... public headers and tools/ files:\n%s' \
    "$leaks" >&2
  exit 1
fi
# The project stands alone: its docs never point at files outside the repository.
if outside=$(grep -rnE '\.\./shared|shared/(seeds|golden|tools|k3-spec|DESIGN)' README.md docs); then
  printf 'check-style: docs point outside the repository:\n%s\n' "$outside" >&2
  exit 1
fi
if command -v clang-format >/dev/null 2>&1; then
  if ! clang-format --dry-run --Werror $files 2>/dev/null; then
    echo "check-style: run clang-format -i on the files above (clang-format --dry-run lists them)" >&2
    exit 1
  fi
fi
echo "check-style: ok"
