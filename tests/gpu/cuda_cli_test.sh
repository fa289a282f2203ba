#!/usr/bin/env bash
# `lstream bench engine --device cuda [--precision fp32|tf32]` end to end.
# With a GPU it must run a step in each precision and print its line;
# without one it must fail cleanly: exit 1 (not a crash or a signal) with
# "no CUDA device" in its message. On any machine, tf32 on the CPU must be
# refused with a message that names --device cuda, and an unknown precision
# is a usage error (exit 2).
# Usage: cuda_cli_test.sh LSTREAM TEST_CUDA_ENGINE
set -uo pipefail
lstream=$1 probe=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

"$probe" --probe >/dev/null
have=$?
fail() {
  echo "cuda_cli: FAIL: $*"
  echo "--- stdout"; cat "$dir/out"
  echo "--- stderr"; cat "$dir/err"
  exit 1
}
# bench ARGS...: one tiny step; sets rc.
bench() {
  "$lstream" bench engine --shape 4,2,8,1,3 --steps 1 --warmup 0 --no-sgemm "$@" \
    >"$dir/out" 2>"$dir/err"
  rc=$?
}

for p in fp32 tf32; do
  bench --device cuda --precision "$p"
  case $have in
  0)
    [ "$rc" -eq 0 ] || fail "with a GPU, bench engine --device cuda --precision $p exited $rc"
    grep -q "^engine device=cuda precision=$p B=4 " "$dir/out" ||
      fail "no 'engine device=cuda precision=$p' line"
    echo "cuda_cli: ok (GPU present: the CUDA engine ran in $p)"
    ;;
  77)
    [ "$rc" -eq 1 ] || fail "without a GPU, bench engine --device cuda --precision $p exited $rc, want 1"
    grep -q 'no CUDA device' "$dir/err" || fail "the message does not say 'no CUDA device'"
    echo "cuda_cli: ok (no GPU, $p: failed cleanly: $(head -n1 "$dir/err"))"
    ;;
  *) fail "test_cuda_engine --probe exited $have" ;;
  esac
done

bench --precision tf32 # on the CPU
[ "$rc" -eq 1 ] || fail "bench engine --precision tf32 on the CPU exited $rc, want 1"
grep -q 'tf32.*--device cuda' "$dir/err" || fail "the tf32-on-CPU message does not name --device cuda"
echo "cuda_cli: ok (tf32 on the CPU refused: $(head -n1 "$dir/err"))"

bench --device cuda --precision bf16
[ "$rc" -eq 2 ] || fail "bench engine --precision bf16 exited $rc, want 2 (usage)"
grep -q "precision 'bf16'" "$dir/err" || fail "the usage error does not name the precision"
echo "cuda_cli: ok (unknown precision: usage error)"
