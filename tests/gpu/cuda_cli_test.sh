#!/usr/bin/env bash
# `lstream bench engine --device cuda` end to end. With a GPU it must run a
# step and print its line; without one it must fail cleanly: exit 1 (not a
# crash or a signal) with "no CUDA device" in its message.
# Usage: cuda_cli_test.sh LSTREAM TEST_CUDA_ENGINE
set -uo pipefail
lstream=$1 probe=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

"$probe" --probe >/dev/null
have=$?
"$lstream" bench engine --device cuda --shape 4,2,8,1,3 --steps 1 --warmup 0 --no-sgemm \
  >"$dir/out" 2>"$dir/err"
rc=$?
fail() {
  echo "cuda_cli: FAIL: $*"
  echo "--- stdout"; cat "$dir/out"
  echo "--- stderr"; cat "$dir/err"
  exit 1
}
case $have in
0)
  [ "$rc" -eq 0 ] || fail "with a GPU, bench engine --device cuda exited $rc"
  grep -q '^engine device=cuda B=4 ' "$dir/out" || fail "no 'engine device=cuda' line"
  echo "cuda_cli: ok (GPU present: the CUDA engine ran)"
  ;;
77)
  [ "$rc" -eq 1 ] || fail "without a GPU, bench engine --device cuda exited $rc, want 1"
  grep -q 'no CUDA device' "$dir/err" || fail "the message does not say 'no CUDA device'"
  echo "cuda_cli: ok (no GPU: failed cleanly: $(head -n1 "$dir/err"))"
  ;;
*) fail "test_cuda_engine --probe exited $have" ;;
esac
