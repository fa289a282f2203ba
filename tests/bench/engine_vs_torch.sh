#!/usr/bin/env bash
# The engine's training step against PyTorch's, side by side in one run.
#
# Two peers: PyTorch 2.x from PyPI (its CPU LSTM runs through oneDNN), in a
# virtual environment this script creates on first use, and Debian's
# python3-torch (1.13) at /usr/bin/python3. For each shape, one round runs
# `lstream bench engine` at 1 and 2 threads (the machine's 2048^3 sgemm rate
# after the second) and tests/bench/torch_engine_step.py under each PyTorch
# (nn.LSTM + Linear + MSE + clip + Adam, 1 and 2 threads), one after the
# other; each side is given the better of its two thread counts (on a shared
# machine one thread can win where the other core is busy),
# ROUNDS times, so that all see the same machine load. Prints the medians,
# the sgemm limit (the step's GEMM FLOPs at the sgemm rate) and the ratios.
#
# Usage: tests/bench/engine_vs_torch.sh [BUILD_DIR] [ROUNDS] [STEPS]
#   BUILD_DIR  where lstream was built (default: build)
#   ROUNDS     alternations per shape (default 3)
#   STEPS      timed steps per run (default 10; each run reports a median)
# Environment:
#   SHAPES        B,I,H,L,T list (default: the six below)
#   TORCH2_VENV   the PyTorch 2.x environment (default
#                 ${XDG_CACHE_HOME:-$HOME/.cache}/lstream/torch2); created with
#                 `/usr/bin/python3 -m venv` and pip (PyTorch's CPU-only index
#                 where reachable, else PyPI) when it has no torch 2.x.
#                 TORCH2_VENV=none leaves the column out.
# Not part of CI: it downloads PyTorch and takes minutes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
rounds=${2:-3}
steps=${3:-10}
lstream="$build/lstream"
[ -x "$lstream" ] || { echo "no $lstream: build first (cmake --build $build)" >&2; exit 1; }
shapes=${SHAPES:-"4,1,64,1,16 16,4,64,2,16 64,4,64,1,64 100,3,72,3,20 256,8,128,2,32 1024,16,256,2,64"}
venv=${TORCH2_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/lstream/torch2}
torch1=/usr/bin/python3

field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
torch_major() { "$1" -c 'import torch; print(torch.__version__.split(".")[0])' 2>/dev/null || true; }

# The PyTorch 2.x interpreter, set up on first use; empty when there is none.
torch2_python() {
  [ "$venv" = none ] && return 0
  local py="$venv/bin/python"
  if [ "$(torch_major "$py")" != 2 ]; then
    echo "setting up PyTorch 2.x in $venv (once) ..." >&2
    mkdir -p "$(dirname "$venv")"
    [ -x "$py" ] || /usr/bin/python3 -m venv "$venv" >&2 || return 0
    # The CPU-only wheels are ~200 MB; PyPI's pull CUDA libraries (~3 GB).
    if curl -sfI --max-time 10 https://download.pytorch.org/whl/cpu/torch/ >/dev/null; then
      "$py" -m pip install -q --index-url https://download.pytorch.org/whl/cpu torch >&2 || true
    fi
    [ "$(torch_major "$py")" = 2 ] || "$py" -m pip install -q torch >&2 || true
  fi
  [ "$(torch_major "$py")" = 2 ] && echo "$py"
  return 0
}

# Best of 1 and 2 threads of one torch run: "ms threads".
torch_run() {
  local out best
  out=$("$1" "$here/torch_engine_step.py" --shape "$2" --steps "$steps")
  best=$(echo "$out" | field ms_per_step | sort -g | head -1)
  echo "$best $(echo "$out" | grep "ms_per_step=$best" | field threads | head -1)"
}
# The thread count most rounds chose.
mode() { sort | uniq -c | sort -rn | awk '{print $2; exit}'; }

py2=$(torch2_python)
echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), $(date -u +%F)," \
  "load $(cut -d' ' -f1-3 /proc/loadavg)"
[ -n "$py2" ] && echo "torch2: $("$py2" -c 'import torch; print(torch.__version__)') ($py2)" ||
  echo "torch2: none (set TORCH2_VENV, or check the network)"
echo "torch1: $("$torch1" -c 'import torch; print(torch.__version__)') ($torch1)"
printf '%-18s %10s %4s %10s %4s %10s %4s %10s %8s %8s %7s\n' "B,I,H,L,T" "lstream_ms" "th" \
  "torch2_ms" "th" "torch1_ms" "th" "sgemm_ms" "vs_best" "vs_t2" "%sgemm"
for s in $shapes; do
  ours=() oth=() ms2=() flops=() gemm=() t2=() t2th=() t1=() t1th=()
  for _ in $(seq "$rounds"); do
    one=$("$lstream" bench engine --no-sgemm --threads 1 --steps "$steps" --shape "$s")
    out=$("$lstream" bench engine --threads 2 --steps "$steps" --shape "$s")
    read -r ms th < <(printf '%s 1\n%s 2\n' "$(echo "$one" | field ms_per_step)" \
      "$(echo "$out" | grep '^engine' | field ms_per_step)" | sort -g | head -1)
    ours+=("$ms") oth+=("$th")
    flops+=("$(echo "$out" | grep '^engine' | field gflops)")
    ms2+=("$(echo "$out" | grep '^engine' | field ms_per_step)")
    gemm+=("$(echo "$out" | grep '^sgemm.*check=ok' | field gflops | sort -g | tail -n 1)")
    if [ -n "$py2" ]; then
      read -r ms th < <(torch_run "$py2" "$s")
      t2+=("$ms") t2th+=("$th")
    fi
    read -r ms th < <(torch_run "$torch1" "$s")
    t1+=("$ms") t1th+=("$th")
  done
  a=$(printf '%s\n' "${ours[@]}" | median)
  g=$(printf '%s\n' "${gemm[@]}" | median)
  # The step's GEMM FLOPs (ms * gflops of each run, all equal) at the sgemm rate.
  lim=$(awk -v ms="${ms2[0]}" -v gf="${flops[0]}" -v g="$g" 'BEGIN {print ms * gf / g}')
  b1=$(printf '%s\n' "${t1[@]}" | median)
  b2=- th2=- r2=-
  if [ -n "$py2" ]; then
    b2=$(printf '%s\n' "${t2[@]}" | median)
    th2=$(printf '%s\n' "${t2th[@]}" | mode)
    r2=$(awk -v a="$a" -v b="$b2" 'BEGIN {printf "%.2f", b / a}')
  fi
  best=$(awk -v a="$b1" -v b="$b2" 'BEGIN {print (b != "-" && b + 0 < a + 0) ? b : a}')
  printf '%-18s %10.2f %4s %10s %4s %10.2f %4s %10.2f %8.2f %8s %6.0f%%\n' "$s" "$a" \
    "$(printf '%s\n' "${oth[@]}" | mode)" "$b2" "$th2" \
    "$b1" "$(printf '%s\n' "${t1th[@]}" | mode)" "$lim" \
    "$(awk -v a="$a" -v b="$best" 'BEGIN {print b / a}')" "$r2" \
    "$(awk -v a="$a" -v l="$lim" 'BEGIN {print 100 * l / a}')"
done
echo "sgemm_ms: the step's GEMM FLOPs at the median 2048^3 sgemm rate of the lstream runs;"
echo "vs_best: best peer / lstream; %sgemm: lstream's GEMM FLOP rate / the sgemm rate;"
echo "th: the thread count most rounds chose (each side the better of 1 and 2)."
