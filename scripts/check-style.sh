#!/usr/bin/env bash
# Style budgets (DESIGN.md rule 14-15): C++ files under 800 lines, and clang-format clean when
# clang-format is installed. Prints the largest files; fails past the budget.
set -euo pipefail
cd "$(dirname "$0")/.."
BUDGET=800
files=$(git ls-files '*.cpp' '*.h' | grep -v 'src/tokenizer/unicode_tables.cpp')
echo "largest C++ files (budget $BUDGET lines):"
wc -l $files | sort -n | grep -v ' total$' | tail -5
over=$(wc -l $files | grep -v ' total$' | awk -v b="$BUDGET" '$1 > b {print $2}')
if [ -n "$over" ]; then
  echo "check-style: over the $BUDGET-line budget: $over" >&2
  exit 1
fi
if command -v clang-format >/dev/null 2>&1; then
  if ! clang-format --dry-run --Werror $files 2>/dev/null; then
    echo "check-style: run clang-format -i on the files above (clang-format --dry-run lists them)" >&2
    exit 1
  fi
fi
echo "check-style: ok"
