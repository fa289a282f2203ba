#!/usr/bin/env bash
# Replicas on one machine: one `lstream train` rank per GPU (or NP CPU ranks
# that split the cores), started with mpirun.
#
# Usage: examples/launch_local.sh [--dry-run] [--] TRAIN_OPTIONS...
#   e.g. examples/launch_local.sh --brokers kafka:9092 --topic ticks \
#          --features 2 --until end
#
# TRAIN_OPTIONS go to `lstream train` unchanged (see `lstream train --help`);
# the script adds --device, and for CPU ranks --threads, unless they are
# already there (on the command line or in a --config file).
#   --dry-run    print the command instead of running it
#   -h, --help   this text
#
# Each rank reads the partitions p with p % NP == rank and owns their series;
# ranks sum gradients every step (NCCL between GPUs, MPI between CPU ranks:
# lstream's --comm auto). With NP=1 lstream runs directly, without mpirun
# (mpirun is then not needed).
#
# Environment:
#   NP           ranks [cuda: the GPUs shown by nvidia-smi -L (or listed in
#                CUDA_VISIBLE_DEVICES); cpu: 1]
#   DEVICE       cuda or cpu [cuda when GPUs are found, else cpu]
#   LSTREAM      the lstream binary [build/lstream of this repository]
#   MPIRUN       the mpirun command [mpirun]
#   MPIRUN_ARGS  more mpirun options, split on spaces (e.g. --oversubscribe,
#                --report-bindings); a --map-by or --bind-to there replaces
#                the script's own
#   NCCL_DEBUG   NCCL's log level for the ranks [WARN]; every NCCL_* and UCX_*
#                variable that is set goes to the ranks too (-x)
#   OMP_NUM_THREADS
#                CPU ranks: threads per rank, also passed as --threads
#                [cores / NP, at least 1]
#   CUDA_VISIBLE_DEVICES
#                if set, the GPUs the ranks may use (counted for NP); passed on
#
# Mapping: GPU ranks are not pinned (--bind-to none); each rank uses the GPU
# of its local rank, so NP above the GPU count is refused. CPU
# ranks go round-robin over the NUMA domains, each bound to its domain.
set -euo pipefail
prog=launch_local.sh
repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=launch_common.sh
source "$repo/examples/launch_common.sh"

launcher_opts "$@"
set -- ${rest[@]+"${rest[@]}"}
[ $# -gt 0 ] || die "no train options (at least --brokers HOST:PORT --topic NAME); see --help"

find_lstream
pick_device "$@"
if [ -z "${NP:-}" ]; then
  NP=1
  [ "$device" = cpu ] || [ "$(gpu_count)" -eq 0 ] || NP=$(gpu_count)
fi
check_np
setup_ranks "$NP" "$@"

if [ "$NP" = 1 ]; then
  cmd=("$lstream" train "$@" "${extra[@]}")
  if [ $dry_run = 1 ]; then
    [ "$device" = cpu ] && printf 'OMP_NUM_THREADS=%s ' "$OMP_NUM_THREADS"
    show_cmd "${cmd[@]}"
    exit 0
  fi
  exec "${cmd[@]}"
fi

find_mpirun
cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
if [ "$NP" -gt "$cores" ] && [[ " ${MPIRUN_ARGS:-} " != *" --oversubscribe "* ]] &&
  [ -z "${OMPI_MCA_rmaps_base_oversubscribe:-}" ]; then
  warn "NP=$NP ranks on $cores cores: mpirun refuses more ranks than cores unless MPIRUN_ARGS=--oversubscribe"
fi
cmd=("$mpirun" -np "$NP" "${mpi_opts[@]}" "${mpi_user[@]}" "$lstream" train "$@" "${extra[@]}")
if [ $dry_run = 1 ]; then
  show_cmd "${cmd[@]}"
  exit 0
fi
exec "${cmd[@]}"
