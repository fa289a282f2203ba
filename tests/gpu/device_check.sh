#!/usr/bin/env bash
# Every check that needs a GPU, in one command, for a machine with a GPU,
# the CUDA toolkit and PyTorch, given a bundle made by device_bundle.sh:
#   1. test_cuda_engine: CUDA against the CPU backend, fp32 and tf32, on
#      the persistent recurrent kernels (and graphs) where a layer fits
#      them, then again all on the per-step path (LSTREAM_CUDA_PERSIST=0)
#   2. compute-sanitizer memcheck and racecheck on test_cuda_engine --small
#   3. `lstream train --device cuda` against --device cpu (50 steps, 1e-4)
#      and --comm nccl against --comm none on one GPU (1e-6)
#   4. tests/bench/engine_cuda_vs_torch.sh: lstream against cuDNN, fp32 and
#      tf32, at the benchmark shapes, each with the persistent kernels and
#      graphs, without graphs, and on the per-step path
# Each step's output goes to OUT_DIR/NAME.log; a summary line per step ends
# the output. A step that fails does not stop the others; the exit status is
# 1 if any failed. Where `nvidia-smi -L` lists a GPU, a step that skips (exit
# 77: "no GPU") is a failure too: the GPU is there but CUDA cannot use it (a
# driver too old for CUDA 13, a hidden device); the probe's CUDA error is in
# environment.log and at the top of the output.
#
# Usage: tests/gpu/device_check.sh BUNDLE_DIR OUT_DIR [STEP...]
#   STEP: engine sanitizer train bench (default: all, in that order)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=$(cd "${1:?usage: device_check.sh BUNDLE_DIR OUT_DIR [STEP...]}" && pwd)
out=${2:?usage: device_check.sh BUNDLE_DIR OUT_DIR [STEP...]}
shift 2
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(engine sanitizer train bench)
mkdir -p "$out"
out=$(cd "$out" && pwd)

# The Python that has PyTorch (with CUDA where there is one), and the CUDA
# libraries the bundle leaves out: from the toolkit or from the nvidia-*
# Python packages.
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

gpus_listed=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
{
  date -u
  nvidia-smi -L 2>&1 || echo "no nvidia-smi"
  echo "PYTHON=$PYTHON"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  ldd "$lstream" "$probe" | grep -E 'not found|cudart|nccl|openblas|rdkafka'
  echo "probe: $("$probe" --probe 2>&1) (exit $("$probe" --probe >/dev/null 2>&1; echo $?))"
} 2>&1 | tee "$out/environment.log"
if ldd "$lstream" "$probe" | grep -q 'not found'; then
  echo "device_check: libraries are missing (see above)"
  exit 1
fi
if [ "$gpus_listed" -gt 0 ] && ! "$probe" --probe >/dev/null 2>&1; then
  echo "device_check: nvidia-smi lists $gpus_listed GPU(s) but CUDA cannot use them:" \
    "$("$probe" --probe 2>&1)"
fi

failed=0
summary=()
# run NAME CMD...: runs a step, logs it, records its result.
run() {
  local name=$1 rc=0 t0=$SECONDS
  shift
  echo "== $name: $*"
  "$@" >"$out/$name.log" 2>&1 || rc=$?
  tail -n 15 "$out/$name.log"
  case $rc in
  0) summary+=("$name: ok ($((SECONDS - t0)) s)") ;;
  77)
    if [ "$gpus_listed" -gt 0 ]; then
      summary+=("$name: FAILED, skipped (exit 77) although nvidia-smi lists a GPU: CUDA cannot use it (see environment.log)")
      failed=1
    else
      summary+=("$name: skipped (no GPU)")
    fi
    ;;
  *) summary+=("$name: FAILED, exit $rc ($((SECONDS - t0)) s)") && failed=1 ;;
  esac
}

for step in "${steps[@]}"; do
  case $step in
  engine)
    run engine "$probe"
    run engine_perstep env LSTREAM_CUDA_PERSIST=0 "$probe"
    ;;
  sanitizer)
    if command -v compute-sanitizer >/dev/null; then
      run memcheck compute-sanitizer --tool memcheck --leak-check full --error-exitcode 3 \
        "$probe" --small
      run racecheck compute-sanitizer --tool racecheck --error-exitcode 3 "$probe" --small
    else
      summary+=("sanitizer: FAILED, no compute-sanitizer on PATH") && failed=1
    fi
    ;;
  train)
    run train_device "$here/train_gpu_test.sh" "$lstream" "$probe" device
    run train_nccl "$here/train_gpu_test.sh" "$lstream" "$probe" nccl
    ;;
  bench) run bench env PYTHON="$PYTHON" "$here/../bench/engine_cuda_vs_torch.sh" "$bundle/bin" ;;
  *) summary+=("$step: FAILED, unknown step") && failed=1 ;;
  esac
done
echo "== summary"
printf '%s\n' "${summary[@]}" | tee "$out/summary.log"
exit $failed
