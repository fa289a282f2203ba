#!/usr/bin/env bash
# The engine's training step against PyTorch's, side by side in one run.
#
# For each shape, runs `lstream bench engine` and the same step in PyTorch
# (tests/bench/torch_engine_step.py: nn.LSTM + Linear + MSE + clip + Adam,
# with 1 and 2 threads, the best taken), alternating ROUNDS times so that
# both see the same machine load, and prints the medians and the ratio.
#
# Usage: tests/bench/engine_vs_torch.sh [BUILD_DIR] [ROUNDS] [STEPS]
#   BUILD_DIR  where lstream was built (default: build)
#   ROUNDS     alternations per shape (default 3)
#   STEPS      timed steps per run (default 10; each run reports a median)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
rounds=${2:-3}
steps=${3:-10}
lstream="$build/lstream"
[ -x "$lstream" ] || { echo "no $lstream: build first (cmake --build $build)" >&2; exit 1; }
shapes=${SHAPES:-"256,8,128,2,32 64,4,64,1,64 1024,16,256,2,64"}

field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }

echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), $(date -u +%F)"
"$lstream" bench engine --steps 1 --warmup 0 --shape 8,1,8,1,2 | grep sgemm || true
printf '%-22s %12s %12s %14s %8s\n' "shape B,I,H,L,T" "lstream_ms" "torch_ms" "torch_threads" "ratio"
for s in $shapes; do
  ours=() theirs=() best_th=()
  for r in $(seq "$rounds"); do
    ours+=("$("$lstream" bench engine --no-sgemm --steps "$steps" --shape "$s" | field ms_per_step)")
    out=$(/usr/bin/python3 "$here/torch_engine_step.py" --shape "$s" --steps "$steps")
    best=$(echo "$out" | field ms_per_step | sort -g | head -1)
    theirs+=("$best")
    best_th+=("$(echo "$out" | grep "ms_per_step=$best" | field threads | head -1)")
  done
  a=$(printf '%s\n' "${ours[@]}" | median)
  b=$(printf '%s\n' "${theirs[@]}" | median)
  th=$(printf '%s\n' "${best_th[@]}" | sort | uniq -c | sort -rn | awk '{print $2; exit}')
  printf '%-22s %12.2f %12.2f %14s %8.2f\n' "$s" "$a" "$b" "$th" "$(awk -v a="$a" -v b="$b" 'BEGIN {print b / a}')"
done
