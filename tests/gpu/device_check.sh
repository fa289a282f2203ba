#!/usr/bin/env bash
# Every check that needs a GPU, as two commands sized for a lent GPU machine
# (10 minutes a command, 15 minutes of device time with the machine's
# start-up): a machine with a GPU, the CUDA driver and PyTorch, given a
# bundle made by device_bundle.sh (a folder or its .tar.xz).
#
#   check   1. test_cuda_engine: CUDA against the CPU backend, fp32 and tf32,
#              on the persistent recurrent kernels (and graphs) where a layer
#              fits them, and again all on the per-step path
#              (LSTREAM_CUDA_PERSIST=0); the two run side by side
#           2. compute-sanitizer memcheck on test_cuda_engine --small (beside
#              them; racecheck too with --racecheck)
#           3. `lstream train --device cuda` against --device cpu (50 steps,
#              Adam eps 1e-6, within 1e-4) and --comm nccl against --comm
#              none on one GPU (1e-6)
#   bench   tests/bench/engine_cuda_vs_torch.sh: lstream against cuDNN, fp32
#           and tf32, at --shapes (default: two), --rounds (default 1)
#
# Each writes its logs into one archive, OUT_DIR/check.tar.gz or
# OUT_DIR/bench.tar.gz, and ends its output with a summary line per step. A
# step that fails does not stop the others; the exit status is 1 if any
# failed. A step still running at --timeout seconds after the command began
# is stopped and fails (so the archive is always written in time). Where
# `nvidia-smi -L` lists a GPU, a step that skips (exit 77: "no GPU") is a
# failure too: the GPU is there but CUDA cannot use it (a driver too old, a
# hidden device); the probe's CUDA error is in environment.log and at the top
# of the output.
#
# Usage: tests/gpu/device_check.sh BUNDLE OUT_DIR check [--only engine,sanitizer,train]
#                                                       [--racecheck] [--small] [--timeout S]
#        tests/gpu/device_check.sh BUNDLE OUT_DIR bench [--shapes "B,I,H,L,T ..."]
#                                                       [--rounds N] [--steps N]
#                                                       [--variants "..."] [--timeout S]
#                                                       [--torch-device cuda|cpu]
#   --timeout  seconds for the whole command (default 420: 7 minutes)
#   --small    the engine suites on the small cases only (a dry run)
#   bench's defaults: --shapes "256,8,128,2,32 1024,16,256,2,64" --rounds 1
#   --steps 10 --variants "default perstep" (see engine_cuda_vs_torch.sh)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
usage() {
  sed -n '/^# Usage:/,/^# *--steps 10/p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
[ $# -ge 3 ] || usage
bundle_arg=$1
out=$2
what=$3
shift 3
only="engine,sanitizer,train"
racecheck=0
budget=420
shapes="256,8,128,2,32 1024,16,256,2,64"
rounds=1
steps=10
variants="default perstep"
small=()
torch_device=cuda
while [ $# -gt 0 ]; do
  case $1 in
  --only) only=${2:?}; shift 2 ;;
  --racecheck) racecheck=1; shift ;;
  --small) small=(--small); shift ;;
  --torch-device) torch_device=${2:?}; shift 2 ;;
  --timeout) budget=${2:?}; shift 2 ;;
  --shapes) shapes=${2:?}; shift 2 ;;
  --rounds) rounds=${2:?}; shift 2 ;;
  --steps) steps=${2:?}; shift 2 ;;
  --variants) variants=${2:?}; shift 2 ;;
  *) echo "device_check: unknown option $1" >&2; usage ;;
  esac
done
case $what in check | bench) ;; *) echo "device_check: unknown command $what" >&2; usage ;; esac
case $budget in '' | *[!0-9]*) echo "device_check: --timeout takes seconds" >&2; exit 2 ;; esac

mkdir -p "$out"
out=$(cd "$out" && pwd)
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
# The bundle: a folder, or its archive unpacked here.
if [ -f "$bundle_arg" ]; then
  tar -C "$logs" -xJf "$bundle_arg" || { echo "device_check: cannot unpack $bundle_arg"; exit 1; }
  bundle=$(find "$logs" -mindepth 1 -maxdepth 1 -type d | head -n1)
  mv "$bundle" "$logs/.bundle" && bundle="$logs/.bundle"
else
  bundle=$(cd "$bundle_arg" && pwd) || exit 1
fi

# The Python that has PyTorch (with CUDA where there is one), and the CUDA
# libraries the bundle leaves out (cuBLAS, NCCL): from the toolkit or from
# the nvidia-* Python packages.
export PYTHON=${PYTHON:-$(command -v python3 || echo /usr/bin/python3)}
cuda_libs=$("$PYTHON" - <<'EOF' 2>/dev/null
import glob, os, site
dirs = []
for root in site.getsitepackages():
    for sub in ("cuda_runtime", "cublas", "nccl", "cu13"):
        dirs += glob.glob(os.path.join(root, "nvidia", sub, "lib"))
print(":".join(dirs))
EOF
)
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do [ -d "$d" ] && cuda_libs="$cuda_libs:$d"; done
export LD_LIBRARY_PATH="$bundle/lib:${cuda_libs#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
lstream="$bundle/bin/lstream"
probe="$bundle/bin/test_cuda_engine"
export PATH="/usr/local/cuda/bin:$PATH"
t_start=$SECONDS
# The bundle's libcudart is the build's minor version; a driver of the same
# major runs it (CUDA's minor version compatibility). Should this driver
# refuse it, the machine's own runtime is tried instead, and said.
if "$probe" --probe 2>&1 | grep -q 'insufficient' && [ -e "$bundle/lib/libcudart.so.13" ]; then
  mv "$bundle/lib/libcudart.so.13" "$bundle/lib/libcudart.so.13.bundled"
  if "$probe" --probe >/dev/null 2>&1; then
    echo "device_check: the driver refused the bundled libcudart; using the machine's own"
  else
    mv "$bundle/lib/libcudart.so.13.bundled" "$bundle/lib/libcudart.so.13"
  fi
fi

gpus_listed=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
{
  date -u
  nvidia-smi -L 2>&1 || echo "no nvidia-smi"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1 || true
  echo "host: $(nproc) cores, $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p')"
  echo "PYTHON=$PYTHON"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  ldd "$lstream" "$probe" | grep -E 'not found|cudart|nccl|openblas|rdkafka'
  echo "probe: $("$probe" --probe 2>&1) (exit $("$probe" --probe >/dev/null 2>&1; echo $?))"
} 2>&1 | tee "$logs/environment.log"
if ldd "$lstream" "$probe" | grep -q 'not found'; then
  echo "device_check: libraries are missing (see above)"
  exit 1
fi
if [ "$gpus_listed" -gt 0 ] && ! "$probe" --probe >/dev/null 2>&1; then
  echo "device_check: nvidia-smi lists $gpus_listed GPU(s) but CUDA cannot use them:" \
    "$("$probe" --probe 2>&1)"
fi

failed=0
: >"$logs/summary.log"
# left: seconds until the command's deadline (at least 1).
left() { local l=$((budget - (SECONDS - t_start))); echo $((l > 0 ? l : 1)); }
# step NAME CMD...: runs a step under the deadline, logs it, records its
# result in summary.log (steps may run side by side: see wait_steps).
step() {
  local name=$1 rc=0 t0=$SECONDS
  shift
  echo "== $name: $*" >"$logs/$name.log"
  timeout -k 10 "$(left)" "$@" >>"$logs/$name.log" 2>&1 || rc=$?
  local line
  case $rc in
  0) line="$name: ok ($((SECONDS - t0)) s)" ;;
  77)
    if [ "$gpus_listed" -gt 0 ]; then
      line="$name: FAILED, skipped (exit 77) although nvidia-smi lists a GPU: CUDA cannot use it (see environment.log)"
    else
      line="$name: skipped (no GPU)"
    fi
    ;;
  124 | 137) line="$name: FAILED, stopped at the deadline (--timeout $budget) after $((SECONDS - t0)) s" ;;
  *) line="$name: FAILED, exit $rc ($((SECONDS - t0)) s)" ;;
  esac
  echo "$line" >>"$logs/summary.log"
  echo "== $name"
  tail -n 12 "$logs/$name.log"
}
has() { case ",$only," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

case $what in
check)
  # The engine suites and the sanitizer side by side (the GPU is large, the
  # CPU reference takes a share of the host's cores each).
  share=$(($(nproc) / 3 > 0 ? $(nproc) / 3 : 1))
  pids=()
  if has engine; then
    OMP_NUM_THREADS=$share step engine "$probe" "${small[@]}" &
    pids+=($!)
    OMP_NUM_THREADS=$share LSTREAM_CUDA_PERSIST=0 step engine_perstep "$probe" "${small[@]}" &
    pids+=($!)
  fi
  if has sanitizer; then
    if command -v compute-sanitizer >/dev/null; then
      OMP_NUM_THREADS=$share step memcheck compute-sanitizer --tool memcheck --leak-check full \
        --error-exitcode 3 "$probe" --small &
      pids+=($!)
    else
      echo "sanitizer: FAILED, no compute-sanitizer on PATH" >>"$logs/summary.log"
    fi
  fi
  for p in "${pids[@]}"; do wait "$p"; done
  if has sanitizer && [ $racecheck = 1 ] && command -v compute-sanitizer >/dev/null; then
    step racecheck compute-sanitizer --tool racecheck --error-exitcode 3 "$probe" --small
  fi
  if has train; then
    step train_device "$here/train_gpu_test.sh" "$lstream" "$probe" device
    step train_nccl "$here/train_gpu_test.sh" "$lstream" "$probe" nccl
  fi
  ;;
bench)
  step bench env PYTHON="$PYTHON" SHAPES="$shapes" VARIANTS="$variants" \
    "$here/../bench/engine_cuda_vs_torch.sh" --build "$bundle/bin" --rounds "$rounds" --steps "$steps" \
    --torch-device "$torch_device"
  ;;
esac
grep -q FAILED "$logs/summary.log" && failed=1
echo "total: $((SECONDS - t_start)) s of --timeout $budget" >>"$logs/summary.log"
tar -C "$logs" --exclude=.bundle -czf "$out/$what.tar.gz" . || failed=1
echo "== summary ($out/$what.tar.gz)"
cat "$logs/summary.log"
exit $failed
