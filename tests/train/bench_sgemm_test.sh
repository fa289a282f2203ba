#!/usr/bin/env bash
# `lstream bench engine`'s GEMM reference (issue 30): the sgemm's result is
# checked, and where OPENBLAS_CORETYPE holds OpenBLAS on an older kernel the
# rate is measured again in a child process without it (widest=1), the
# faster checked line being what share= divides by.
# Usage: bench_sgemm_test.sh LSTREAM
set -euo pipefail
lstream=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p"; }

# Unset: one line, the widest kernel, a checked product.
env -u OPENBLAS_CORETYPE "$lstream" bench engine --sgemm-only --sgemm-n 192 --threads 1 >"$work/one"
cat "$work/one"
[ "$(wc -l <"$work/one")" = 1 ] || fail "--sgemm-only printed $(wc -l <"$work/one") lines"
grep -q '^sgemm device=cpu n=192 threads=1 core=[^ ]* widest=1 gflops=[0-9.]* check=ok$' "$work/one" ||
  fail "the sgemm line is not as documented"

# Set: the line as set, then the child's without it, and the engine's share
# over the faster one.
OPENBLAS_CORETYPE=Haswell "$lstream" bench engine --sgemm-n 192 --threads 1 --shape 4,2,8,1,3 \
  --steps 3 --warmup 0 >"$work/two"
cat "$work/two"
mapfile -t lines <"$work/two"
[ "${#lines[@]}" = 3 ] || fail "expected two sgemm lines and one engine line"
case ${lines[0]} in *widest=1*) fail "the first line claims the widest kernel with the variable set" ;; esac
case ${lines[1]} in *" widest=1 "*check=ok) ;; *) fail "no checked line without OPENBLAS_CORETYPE" ;; esac
g1=$(echo "${lines[0]}" | field gflops) g2=$(echo "${lines[1]}" | field gflops)
gf=$(echo "${lines[2]}" | field gflops) share=$(echo "${lines[2]}" | field share)
[ -n "$share" ] || fail "the engine line has no share"
/usr/bin/python3 - "$g1" "$g2" "$gf" "$share" <<'PY' || fail "share is not gflops over the faster sgemm"
import sys
g1, g2, gf, share = map(float, sys.argv[1:])
want = gf / max(g1, g2)
sys.exit(0 if abs(share - want) <= 0.01 + 0.02 * want else 1)
PY

# Refusals.
if "$lstream" bench engine --sgemm-only --no-sgemm 2>"$work/err"; then fail "both flags accepted"; fi
grep -q "exclude each other" "$work/err" || fail "no message for --sgemm-only with --no-sgemm"
if "$lstream" bench engine --sgemm-only --sgemm-n 8 2>"$work/err"; then fail "--sgemm-n 8 accepted"; fi
# No share where no sgemm is measured.
"$lstream" bench engine --no-sgemm --threads 1 --shape 4,2,8,1,3 --steps 1 --warmup 0 >"$work/none"
! grep -q "share=\|^sgemm" "$work/none" || fail "--no-sgemm still measures the sgemm"
echo "bench_sgemm: ok"
