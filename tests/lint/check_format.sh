#!/usr/bin/env bash
# The tree's C, C++ and CUDA sources are formatted by clang-format with the
# repository's settings (.clang-format at the root). Run by ctest as
# lint_format; prints each file that is not, with its diff, and the command
# that formats them. A region kept in its own layout (a table) is fenced by
# `/* clang-format off */ ... /* clang-format on */` in the file itself.
#
# clang-format's output changes between major versions: the check runs with
# the version the settings were written for (Debian 12's clang-format 14)
# and is skipped (exit 77) with another one; a missing clang-format fails.
# Usage: check_format.sh SOURCE_DIR CLANG_FORMAT
set -uo pipefail
root=$1 clang_format=${2:-}
major=14
# Files left out on purpose, relative to the root, with the reason. None
# today: the fences above keep tables in their own layout.
excluded=()

if [ -z "$clang_format" ] || ! command -v "$clang_format" >/dev/null; then
  echo "lint_format: FAIL: clang-format not found (Debian: apt-get install clang-format;" \
    ".ci/install-deps installs it), then configure again"
  exit 1
fi
version=$("$clang_format" --version)
if ! [[ $version =~ version\ $major\. ]]; then
  echo "lint_format: skipped: the settings are checked with clang-format $major, found: $version"
  exit 77
fi

cd "$root" || exit 1
mapfile -t files < <(find include ingest state train kernels tests examples -type f \
  \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cpp' \) | sort)
[ "${#files[@]}" -gt 0 ] || { echo "lint_format: FAIL: no sources under $root"; exit 1; }

checked=()
for f in "${files[@]}"; do
  for x in "${excluded[@]}"; do [ "$f" = "$x" ] && continue 2; done
  checked+=("$f")
done
# One run over every file: each one not formatted is named in an error.
report=$("$clang_format" --dry-run -Werror --style=file "${checked[@]}" 2>&1)
rc=$?
mapfile -t bad < <(sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' \
  <<<"$report" | sort -u)
if [ "$rc" -ne 0 ] && [ "${#bad[@]}" -eq 0 ]; then
  echo "lint_format: FAIL: clang-format exited $rc:"
  echo "$report" | head -20
  exit 1
fi
if [ "${#bad[@]}" -gt 0 ]; then
  echo "lint_format: FAIL: ${#bad[@]} of ${#checked[@]} files are not formatted (.clang-format):"
  for f in "${bad[@]:0:5}"; do # the first few with their diffs
    echo "--- $f"
    "$clang_format" --style=file "$f" | diff -u "$f" - | sed -n '3,40p'
  done
  [ "${#bad[@]}" -le 5 ] || printf '  %s\n' "${bad[@]:5}"
  echo "Format them with: (cd $root && $clang_format -i ${bad[*]})"
  exit 1
fi
echo "lint_format: ${#checked[@]} files formatted (${#excluded[@]} excluded)"
