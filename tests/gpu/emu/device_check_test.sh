#!/usr/bin/env bash
# tests/gpu/device_check.sh (the real-GPU checks in one command) on a bundle
# of the emulated programs, with a stand-in nvidia-smi on PATH:
#   1. nvidia-smi lists a GPU and the emulated driver is too old for CUDA 13
#      (EMU_DEVICE=old-driver): every step fails loudly (exit 1, the CUDA
#      error in the logs), none passes as skipped
#   2. nvidia-smi lists a GPU but CUDA sees none (EMU_DEVICE=none): fails too
#   3. no GPU anywhere (no driver either, EMU_DEVICE=no-driver, as in CI):
#      the steps skip, exit 0
#   4. a GPU that works (the emulated one): the train step passes (--device
#      cuda against cpu, --comm nccl against none on one GPU)
# Usage: device_check_test.sh LSTREAM_ON_EMU TEST_CUDA_ENGINE_ON_EMU
set -euo pipefail
emu=$1
probe=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export PYTHON=/usr/bin/python3 # numpy (params_close.py)

mkdir -p "$work/bundle/bin" "$work/bundle/lib" "$work/path"
cp "$emu" "$work/bundle/bin/lstream"
cp "$probe" "$work/bundle/bin/test_cuda_engine"
# nvidia-smi -L as on a machine with one H100 (GPUS=1) or none (GPUS=0).
cat >"$work/path/nvidia-smi" <<'SMI'
#!/bin/sh
[ "${GPUS:-0}" -gt 0 ] || { echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."; exit 9; }
echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000000)"
SMI
chmod +x "$work/path/nvidia-smi"

# check NAME GPUS EMU_DEVICE WANT_RC STEP...: runs device_check.sh, wants its
# exit status; its output in $work/NAME.out.
check() {
  local name=$1 gpus=$2 device=$3 want=$4 rc=0
  shift 4
  PATH="$work/path:$PATH" GPUS=$gpus EMU_DEVICE=$device \
    timeout 300 "$here/../device_check.sh" "$work/bundle" "$work/$name" "$@" >"$work/$name.out" 2>&1 || rc=$?
  sed -n '/^== summary/,$p' "$work/$name.out" | sed "s/^/$name: /"
  [ "$rc" = "$want" ] || { cat "$work/$name.out"; fail "$name: device_check.sh exited $rc, want $want"; }
}

check old-driver 1 old-driver 1 engine train
grep -q 'engine: FAILED' "$work/old-driver.out" || fail "old-driver: the engine step did not fail"
grep -q 'train_device: FAILED' "$work/old-driver.out" || fail "old-driver: the train step did not fail"
grep -q 'cudaErrorInsufficientDriver' "$work/old-driver/engine.log" ||
  fail "old-driver: the engine log does not name CUDA's error"
grep -q 'cannot use them' "$work/old-driver.out" || fail "old-driver: no loud message up front"

check hidden 1 none 1 engine
grep -q 'engine: FAILED, skipped (exit 77) although nvidia-smi lists a GPU' "$work/hidden.out" ||
  fail "hidden: a skip was not counted as a failure"

check none 0 no-driver 0 engine train
grep -q 'engine: skipped (no GPU)' "$work/none.out" || fail "none: the engine step did not skip"

check working 1 1 0 train
grep -q 'train_device: ok' "$work/working.out" && grep -q 'train_nccl: ok' "$work/working.out" ||
  fail "working: the train steps did not pass"
grep -q 'nccl.*max |difference|' "$work/working/train_nccl.log" ||
  fail "working: --comm nccl was not compared with --comm none"
echo "PASS"
