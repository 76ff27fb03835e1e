#!/usr/bin/env bash
# Checks the C++ lines a change touches against .clang-format (clang-format 14, Debian package
# clang-format): the lines that differ between BASE and the working tree. Untouched lines, and
# so untouched legacy files, are not checked. Exits 1 and prints the diff that would fix them.
#   scripts/check-format.sh [BASE]
# BASE defaults to the merge base with origin/main, or HEAD~1 where that is HEAD itself (CI on
# main: the last commit) or there is no origin/main.
# To fix what it reports: git clang-format BASE
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-}
if [ -z "$base" ]; then
  if git rev-parse -q --verify origin/main >/dev/null; then
    base=$(git merge-base HEAD origin/main)
  fi
  if [ -z "$base" ] || [ "$base" = "$(git rev-parse HEAD)" ]; then
    if ! git rev-parse -q --verify HEAD~1 >/dev/null; then
      echo "check-format: no earlier commit to compare with; nothing checked"
      exit 0
    fi
    base=$(git rev-parse HEAD~1)
  fi
fi
for tool in clang-format git-clang-format; do
  command -v "$tool" >/dev/null || { echo "check-format: $tool not found; install clang-format (scripts/setup.sh)" >&2; exit 1; }
done
out=$(git clang-format --binary "$(command -v clang-format)" --diff --extensions cc,h,cpp,hpp,cu,cuh "$base" 2>&1) || true
case "$out" in
  "" | *"no modified files to format"* | *"did not modify any files"*)
    echo "check-format: the C++ lines changed since ${base:0:12} follow .clang-format"
    ;;
  *)
    echo "$out"
    echo "check-format: the C++ lines above, changed since ${base:0:12}, do not follow .clang-format; run: git clang-format $base" >&2
    exit 1
    ;;
esac
