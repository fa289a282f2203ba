#!/usr/bin/env bash
# The CUDA engine's training step against PyTorch's on the same GPU, in one run.
#
# For each shape and precision (fp32, tf32), runs `lstream bench engine
# --device cuda --precision P` and the same step in PyTorch
# (tests/bench/torch_engine_step.py --device cuda: nn.LSTM through cuDNN +
# Linear + MSE + clip + Adam, TF32 switched on or off for both cuBLAS and
# cuDNN), alternating ROUNDS times so that both see the same GPU state, and
# prints the medians and the ratio torch_ms / lstream_ms (above 1: lstream is
# faster). Each run reports the median of STEPS steps after WARMUP. lstream
# runs in each of VARIANTS, alternating with the others: `default` (the
# persistent recurrent kernels where a layer fits, CUDA graphs), `nographs`
# (LSTREAM_CUDA_GRAPHS=0: every launch from the host) and `perstep`
# (LSTREAM_CUDA_PERSIST=0: a GEMM and a cell kernel per layer and time step,
# the path before the persistent kernels), one row each.
#
# Usage: tests/bench/engine_cuda_vs_torch.sh [--build DIR] [--rounds N] [--steps N]
#          [--warmup N] [--shapes "B,I,H,L,T ..."] [--precisions "fp32 tf32"]
#          [--variants "default nographs perstep"]
#   --build       where lstream was built (default: build)
#   --rounds      alternations per shape and precision (default 3)
#   --steps       timed steps per run (default 10)
#   --warmup      untimed steps first (default 3)
#   --shapes      default "256,8,128,2,32 64,4,64,1,64 1024,16,256,2,64
#                 4096,32,512,2,128"
#   --precisions  default "fp32 tf32"; --variants default all three
#   --torch-device  the peer's device (default cuda; cpu only for a dry run
#                 of this script where PyTorch has no CUDA, as under the
#                 CUDA emulation in CI: its ratios then mean nothing)
#   env: SHAPES, PRECISIONS, VARIANTS, WARMUP as defaults for the options;
#        PYTHON (an interpreter whose torch has CUDA; default: the first of
#        python3 on PATH, /usr/bin/python3 that has one)
# Exit status: 0 measured, 77 no CUDA GPU (nothing to measure), 1 an error,
# 2 a bad option.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=build
rounds=3
steps=10
warmup=${WARMUP:-3}
shapes=${SHAPES:-"256,8,128,2,32 64,4,64,1,64 1024,16,256,2,64 4096,32,512,2,128"}
precisions=${PRECISIONS:-"fp32 tf32"}
variants=${VARIANTS:-"default nographs perstep"}
torch_device=cuda
while [ $# -gt 0 ]; do
  case $1 in
  --build) build=${2:?--build takes a folder}; shift 2 ;;
  --rounds) rounds=${2:?--rounds takes a count}; shift 2 ;;
  --steps) steps=${2:?--steps takes a count}; shift 2 ;;
  --warmup) warmup=${2:?--warmup takes a count}; shift 2 ;;
  --shapes) shapes=${2:?--shapes takes a list}; shift 2 ;;
  --precisions) precisions=${2:?--precisions takes a list}; shift 2 ;;
  --variants) variants=${2:?--variants takes a list}; shift 2 ;;
  --torch-device) torch_device=${2:?--torch-device takes cuda or cpu}; shift 2 ;;
  -h | --help) sed -n '/^# Usage:/,/^# Exit status/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "engine_cuda_vs_torch: unknown option $1 (--help)" >&2; exit 2 ;;
  esac
done
case $torch_device in cuda | cpu) ;; *) echo "engine_cuda_vs_torch: --torch-device is cuda or cpu" >&2; exit 2 ;; esac
for n in "$rounds" "$steps" "$warmup"; do
  case $n in '' | *[!0-9]*) echo "engine_cuda_vs_torch: --rounds, --steps, --warmup take counts" >&2; exit 2 ;; esac
done
lstream="$build/lstream"
[ -x "$lstream" ] || { echo "no $lstream: build first (cmake --build $build)" >&2; exit 1; }
# variant_env VARIANT: the environment it runs lstream in.
variant_env() {
  case $1 in
  default) echo "LSTREAM_CUDA_VARIANT=default" ;;
  nographs) echo "LSTREAM_CUDA_GRAPHS=0" ;;
  perstep) echo "LSTREAM_CUDA_PERSIST=0" ;;
  *) echo "unknown variant $1 (default, nographs, perstep)" >&2; exit 2 ;;
  esac
}
for v in $variants; do variant_env "$v" >/dev/null; done
err=$(mktemp)
trap 'rm -f "$err"' EXIT

# Is there a GPU lstream can use? One tiny step answers it.
if ! "$lstream" bench engine --device cuda --shape 4,2,8,1,3 --steps 1 --warmup 0 --no-sgemm \
  >/dev/null 2>"$err"; then
  if grep -q 'no CUDA device' "$err"; then
    echo "no CUDA GPU: nothing to measure ($(head -n1 "$err"))"
    exit 77
  fi
  echo "lstream cannot run on CUDA:" >&2
  cat "$err" >&2
  exit 1
fi

# A PyTorch with CUDA (Debian's python3-torch has none).
python=${PYTHON:-}
if [ -z "$python" ]; then
  for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null &&
      "$p" -c "import sys, torch; sys.exit(0 if '$torch_device' == 'cpu' or torch.cuda.is_available() else 1)" 2>/dev/null; then
      python=$p
      break
    fi
  done
  [ -n "$python" ] || {
    echo "a GPU is there but no PyTorch with CUDA was found (tried python3, /usr/bin/python3): set PYTHON" >&2
    exit 1
  }
fi

field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }

if command -v nvidia-smi >/dev/null; then
  gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -n1)
else
  gpu=$("$python" -c 'import torch; print(torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA in PyTorch")')
fi
echo "gpu: $gpu"
[ "$torch_device" = cuda ] || echo "note: PyTorch runs on the CPU (--torch-device cpu): a dry run, the ratios mean nothing"
"$python" -c 'import torch, sys
print(f"torch: {torch.__version__} (CUDA {torch.version.cuda}), cuDNN {torch.backends.cudnn.version()}, "
      f"cudnn.enabled={torch.backends.cudnn.enabled}, python {sys.executable}")'
echo "host: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), $(date -u +%F)"
if [ -n "${NVIDIA_TF32_OVERRIDE:-}" ]; then
  echo "note: NVIDIA_TF32_OVERRIDE=$NVIDIA_TF32_OVERRIDE is set (=0 turns TF32 off in cuBLAS and cuDNN for both sides)"
fi
echo "rounds=$rounds steps=$steps warmup=$warmup (median of each run, then median of the runs)"
printf '%-22s %9s %9s %12s %12s %8s\n' "shape B,I,H,L,T" "precision" "variant" "lstream_ms" \
  "torch_ms" "ratio"
for s in $shapes; do
  for p in $precisions; do
    declare -A ours=()
    theirs=()
    for r in $(seq "$rounds"); do
      for v in $variants; do
        ours[$v]+="$(env "$(variant_env "$v")" "$lstream" bench engine --device cuda --precision "$p" \
          --no-sgemm --steps "$steps" --warmup "$warmup" --shape "$s" | field ms_per_step) "
      done
      if [ "$torch_device" = cuda ]; then peer=(--precision "$p"); else peer=(--threads 1); fi
      theirs+=("$("$python" "$here/torch_engine_step.py" --device "$torch_device" "${peer[@]}" \
        --shape "$s" --steps "$steps" --warmup "$warmup" | field ms_per_step)")
    done
    b=$(printf '%s\n' "${theirs[@]}" | median)
    for v in $variants; do
      a=$(printf '%s\n' ${ours[$v]} | median)
      printf '%-22s %9s %9s %12.3f %12.3f %8.2f\n' "$s" "$p" "$v" "$a" "$b" \
        "$(awk -v a="$a" -v b="$b" 'BEGIN {print b / a}')"
    done
    unset ours
  done
done
