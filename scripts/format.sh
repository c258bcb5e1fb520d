#!/usr/bin/env bash
# format.sh -- apply the house C++ style (.clang-format) to every tracked C++ file; with --check, change nothing
# and fail naming each file clang-format would change (CI runs the check). The formatter is pinned
# (clang-format==19.1.7, installed by scripts/setup.sh): another release formats some constructs differently.
set -euo pipefail
cd "$(dirname "$0")/.."
want=19.1.7
# The formatter: $CLANG_FORMAT, else the one the pip package put beside $PYTHON (its bin/ may not be on PATH),
# else clang-format on PATH.
CF=${CLANG_FORMAT:-$("${PYTHON:-python3}" -c 'import clang_format, os; print(os.path.join(os.path.dirname(clang_format.__file__), "data", "bin", "clang-format"))' 2>/dev/null || command -v clang-format || true)}
[ -n "$CF" ] && [ -x "$CF" ] || { echo "format.sh: clang-format not found (pip install clang-format==$want)" >&2; exit 2; }
have=$("$CF" --version | sed -n 's/.*version \([0-9.]*\).*/\1/p')
[ "$have" = "$want" ] || { echo "format.sh: clang-format $have, the house style is pinned to $want (pip install clang-format==$want)" >&2; exit 2; }
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.h')
if [ "${1:-}" = --check ]; then
  bad=$("$CF" --dry-run "${files[@]}" 2>&1 | sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: warning:.*/\1/p' | sort -u)
  if [ -n "$bad" ]; then
    echo "format.sh: not in the house style (run scripts/format.sh):" >&2; echo "$bad" | sed 's/^/  /' >&2; exit 1
  fi
  echo "format.sh: ${#files[@]} files in the house style"
else
  "$CF" -i "${files[@]}"
fi
