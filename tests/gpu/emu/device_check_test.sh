#!/usr/bin/env bash
# tests/gpu/device_check.sh (the real-GPU checks in one command) on a bundle
# of the emulated programs, with a stand-in nvidia-smi on PATH:
#   1. nvidia-smi lists a GPU and the emulated driver is too old for CUDA 13
#      (EMU_DEVICE=old-driver): every step fails loudly (exit 1, the CUDA
#      error in the logs), none passes as skipped
#   2. nvidia-smi lists a GPU but CUDA sees none (EMU_DEVICE=none): fails too
#   3. no GPU anywhere (no driver either, EMU_DEVICE=no-driver, as in CI):
#      the steps skip, exit 0
#   4. the two commands of README's "The GPU" end to end, as a dry run on
#      a GPU that works (the emulated one): `check --small` (every step, a
#      stand-in compute-sanitizer that runs the program without the tool;
#      the train steps --device cuda against cpu and --comm nccl against
#      none on one GPU) and `bench` at a small shape with PyTorch on the
#      CPU; each writes its archive of logs
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
cat >"$work/path/compute-sanitizer" <<'SAN'
#!/bin/sh
# A stand-in: the program without the tool (the emulation has no sanitizer).
while [ $# -gt 0 ]; do
  case $1 in --tool | --error-exitcode | --leak-check) shift 2 ;; --*) shift ;; *) break ;; esac
done
exec "$@"
SAN
chmod +x "$work/path/nvidia-smi" "$work/path/compute-sanitizer"

# run NAME GPUS EMU_DEVICE WANT_RC COMMAND OPTION...: runs device_check.sh
# COMMAND, wants its exit status; its output in $work/NAME.out, its logs
# unpacked from its archive into $work/NAME/.
run() {
  local name=$1 gpus=$2 device=$3 want=$4 command=$5 rc=0
  shift 5
  PATH="$work/path:$PATH" GPUS=$gpus EMU_DEVICE=$device \
    timeout 600 "$here/../device_check.sh" "$work/bundle" "$work/$name" "$command" "$@" \
    >"$work/$name.out" 2>&1 || rc=$?
  sed -n '/^== summary/,$p' "$work/$name.out" | sed "s/^/$name: /"
  [ "$rc" = "$want" ] || { cat "$work/$name.out"; fail "$name: device_check.sh exited $rc, want $want"; }
  [ -s "$work/$name/$command.tar.gz" ] || fail "$name: no $command.tar.gz"
  tar -C "$work/$name" -xzf "$work/$name/$command.tar.gz" || fail "$name: a bad archive"
}
check() { local n=$1 g=$2 d=$3 w=$4; shift 4; run "$n" "$g" "$d" "$w" check "$@"; }

check old-driver 1 old-driver 1 --only engine,train
grep -q 'engine: FAILED' "$work/old-driver.out" || fail "old-driver: the engine step did not fail"
grep -q 'train_device: FAILED' "$work/old-driver.out" || fail "old-driver: the train step did not fail"
grep -q 'cudaErrorInsufficientDriver' "$work/old-driver/engine.log" ||
  fail "old-driver: the engine log does not name CUDA's error"
grep -q 'cannot use them' "$work/old-driver.out" || fail "old-driver: no loud message up front"

check hidden 1 none 1 --only engine
grep -q 'engine: FAILED, skipped (exit 77) although nvidia-smi lists a GPU' "$work/hidden.out" ||
  fail "hidden: a skip was not counted as a failure"

check none 0 no-driver 0 --only engine,train
grep -q 'engine: skipped (no GPU)' "$work/none.out" || fail "none: the engine step did not skip"


# The README's two commands, as a dry run on the emulated GPU (the bundle
# as its archive, as it travels).
tar -C "$work" -cJf "$work/bundle.tar.xz" bundle
mv "$work/bundle" "$work/bundle.dir"
ln -s bundle.tar.xz "$work/bundle"
check dry-check 1 1 0 --small
for s in engine engine_perstep memcheck train_device train_nccl; do
  grep -q "^$s: ok" "$work/dry-check/summary.log" || fail "dry-check: $s did not pass"
done
grep -q 'nccl.*max |difference|' "$work/dry-check/train_nccl.log" ||
  fail "dry-check: --comm nccl was not compared with --comm none"
run dry-bench 1 1 0 bench --shapes 16,4,32,1,8 --rounds 1 --steps 2 --torch-device cpu
grep -Eq '^16,4,32,1,8 +tf32 +perstep +[0-9.]+ +[0-9.]+' "$work/dry-bench/bench.log" ||
  fail "dry-bench: no table row for tf32 perstep"
echo "PASS"
