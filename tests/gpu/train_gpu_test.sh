#!/usr/bin/env bash
# `lstream train` on the GPU, and the NCCL sums, end to end on the embedded
# broker.
#
# Usage: train_gpu_test.sh LSTREAM TEST_CUDA_ENGINE CASE
#   device  (GPU only; exit 77 without one) a replay of 50 steps with
#           --device cuda ends within 1e-4 (norm-relative) of --device cpu
#           (Adam's eps 1e-6, as in the emulated test: with the default 1e-8
#           a parameter whose gradient is near zero moves by lr whatever
#           the rounding, and 50 steps can take it past 1e-4)
#   nccl    with a GPU: one rank with --comm nccl (and --comm-always true, so
#           that the NCCL sums run on one rank) ends within 1e-6 of
#           --comm none on the same GPU, and with two or more GPUs,
#           `mpirun -np 2 --comm nccl` within 1e-5 of one rank; without a GPU
#           (CI): --comm nccl on the CPU, --device cuda and `bench comm
#           --device cuda` under mpirun each fail cleanly (exit 1, a message
#           that says why, no hang) — and the case passes on those checks
set -euo pipefail
lstream=$1
probe=$2
case_name=$3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../train/lib.sh"
mpi_env
close="$here/../train/params_close.py"
python=${PYTHON:-/usr/bin/python3} # numpy; on the GPU machine its own python3

gpus=0
probe_rc=0
"$probe" --probe >"$work/probe" 2>&1 || probe_rc=$?
case $probe_rc in
0)
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
  [ "$gpus" -ge 1 ] || gpus=1
  ;;
77) ;;
*) fail "CUDA is unusable (test_cuda_engine --probe exited $probe_rc): $(cat "$work/probe")" ;;
esac

if [ "$case_name" = device ] && [ "$gpus" -eq 0 ]; then
  echo "no CUDA GPU: --device cuda vs cpu not run (skipped)"
  exit 77
fi
start_broker --topic g:4
"$lstream" produce --brokers "$bootstrap" --topic g --series 32 --features 2 \
  --records-per-series 600 --generator sine --noise 0.01 --seed 3 >/dev/null
args=(train --brokers "$bootstrap" --topic g --features 2 --window 8 --batch 16 --hidden 32
  --layers 2 --lr 0.005 --eps 1e-6 --until end --max-steps 50 --quiet)

# expect_failure NAME CMD...: exit 1 (not a crash, signal or hang) with a
# message; prints it.
expect_failure() {
  local name=$1 rc=0
  shift
  timeout 120 "$@" >"$work/out" 2>"$work/err" || rc=$?
  [ "$rc" -eq 1 ] || { cat "$work/err"; fail "$name: exit $rc, want 1"; }
  echo "ok: $name fails cleanly: $(grep -m1 'lstream' "$work/err")"
}

case "$case_name" in
device)
  "$lstream" "${args[@]}" --device cpu --params-out "$work/cpu.bin" >/dev/null ||
    fail "--device cpu exited $?"
  "$lstream" "${args[@]}" --device cuda --params-out "$work/cuda.bin" >"$work/out" ||
    fail "--device cuda exited $?"
  grep '^summary' "$work/out"
  [ "$(field "$work/out" summary steps)" = 50 ] || fail "the cuda run did not take 50 steps"
  "$python" "$close" 1e-4 "$work/cpu.bin" "$work/cuda.bin" || fail "cuda differs from cpu"
  ;;
nccl)
  if [ "$gpus" -eq 0 ]; then
    expect_failure "--comm nccl on the CPU" "$lstream" "${args[@]}" --comm nccl --device cpu
    grep -q 'comm nccl sums GPU buffers' "$work/err" || fail "the message does not say why"
    expect_failure "--comm nccl --device cuda without a GPU" \
      "$lstream" "${args[@]}" --comm nccl --device cuda
    grep -q 'no CUDA device' "$work/err" || fail "the message does not say 'no CUDA device'"
    rc=0
    timeout 120 mpirun -np 2 "$lstream" bench comm --device cuda --reps 1 >"$work/out" \
      2>"$work/err" || rc=$?
    [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "mpirun bench comm --device cuda exited $rc"
    grep -q 'no CUDA device' "$work/err" || fail "bench comm does not say 'no CUDA device'"
    echo "ok: mpirun -np 2 bench comm --device cuda fails cleanly (exit $rc)"
    echo "no CUDA GPU: the NCCL sums themselves were not run"
  else
    "$lstream" "${args[@]}" --device cuda --comm none --params-out "$work/none.bin" >/dev/null ||
      fail "--comm none exited $?"
    "$lstream" "${args[@]}" --device cuda --comm nccl --comm-always true \
      --params-out "$work/nccl.bin" >/dev/null || fail "--comm nccl exited $?"
    "$python" "$close" 1e-6 "$work/none.bin" "$work/nccl.bin" || fail "nccl differs"
    if [ "$gpus" -ge 2 ]; then
      timeout 300 mpirun -np 2 --bind-to none "$lstream" "${args[@]}" --device cuda --comm nccl \
        --params-out "$work/nccl2.bin" >/dev/null || fail "mpirun -np 2 --comm nccl exited $?"
      "$python" "$close" 1e-5 "$work/none.bin" "$work/nccl2.bin" || fail "2 ranks differ"
      timeout 120 mpirun -np 2 --bind-to none "$lstream" bench comm --device cuda
    else
      echo "one GPU: the 2-rank NCCL run needs two"
    fi
  fi
  ;;
*) fail "unknown case $case_name" ;;
esac
echo "PASS: $case_name"
