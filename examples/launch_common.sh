# shellcheck shell=bash disable=SC2034,SC2154
# (prog and repo come from the sourcing script; the variables set here are
# its results.)
# Shared by launch_local.sh and launch_cluster.sh (sourced, not run): the
# environment checks and the pieces of the mpirun command line they have in
# common. Expects $prog (the script's name, for messages) and $repo (the
# repository root) to be set before it is sourced.
#
#   die MSG                    "PROG: error: MSG" on stderr, exit 2
#   warn MSG                   "PROG: warning: MSG" on stderr
#   gpu_count                  GPUs this host shows (CUDA_VISIBLE_DEVICES if
#                              set, else `nvidia-smi -L`; 0 without either)
#   train_opt NAME ARGS...     the value of `--NAME V` in ARGS (the last one),
#                              else of `NAME = V` in a --config FILE of ARGS;
#                              empty when neither gives it
#   check_np                   $NP is a positive integer
#   find_lstream               $LSTREAM (default build/lstream) is an
#                              executable; sets $lstream to its absolute path
#   find_mpirun                $MPIRUN (default mpirun) runs; sets $mpirun
#   pick_device ARGS...        $DEVICE, else --device of the train ARGS, else
#                              cuda where gpu_count > 0, else cpu: sets
#                              $device and starts the extra train options
#                              $extra (--device unless ARGS give it)
#   setup_ranks PER_HOST ARGS...
#                              after pick_device: adds --threads to $extra for
#                              CPU ranks (unless threads_here=0: the ranks run
#                              elsewhere and take their share of their own
#                              host's cores), sets the mpirun options $mpi_opts
#                              (mapping, -x VAR for the environment) and
#                              $mpi_user (MPIRUN_ARGS); PER_HOST = the most
#                              ranks on one host
#   show_cmd CMD...            print CMD shell-quoted on one line (--dry-run)

die() {
  echo "$prog: error: $*" >&2
  exit 2
}
warn() { echo "$prog: warning: $*" >&2; }

gpu_count() {
  if [ -n "${CUDA_VISIBLE_DEVICES+x}" ]; then
    # The ranks see only these: count the entries, whatever nvidia-smi lists.
    local -a ids
    IFS=, read -ra ids <<<"$CUDA_VISIBLE_DEVICES"
    echo "${#ids[@]}"
  elif command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true
  else
    echo 0
  fi
}

train_opt() {
  local name=$1 value='' config='' i
  shift
  local -a a=("$@")
  for ((i = 0; i + 1 < ${#a[@]}; i++)); do
    case "${a[i]}" in
    "--$name") value=${a[i + 1]} ;;
    --config) config=${a[i + 1]} ;;
    esac
  done
  if [ -z "$value" ] && [ -n "$config" ] && [ -r "$config" ]; then
    # KEY = VALUE lines; dashes and underscores alike, as lstream reads them.
    value=$(sed -n "s/^[[:space:]]*${name//-/[-_]}[[:space:]]*=[[:space:]]*\([^[:space:]#]*\).*/\1/p" \
      "$config" | tail -n 1)
  fi
  echo "$value"
}

check_np() {
  [[ $NP =~ ^[1-9][0-9]*$ ]] || die "NP='$NP': expected a positive number of ranks"
}

find_lstream() {
  local path=${LSTREAM:-$repo/build/lstream}
  [ -e "$path" ] || die "no lstream binary at $path (build it: cmake -S . -B build && cmake --build build; or set LSTREAM=PATH)"
  if [ ! -f "$path" ] || [ ! -x "$path" ]; then die "$path is not an executable file (LSTREAM=$path)"; fi
  lstream=$(cd "$(dirname "$path")" && pwd)/$(basename "$path")
}

find_mpirun() {
  mpirun=${MPIRUN:-mpirun}
  command -v "$mpirun" >/dev/null 2>&1 ||
    die "'$mpirun' not found (install Open MPI, e.g. apt-get install openmpi-bin, or set MPIRUN=PATH)"
}

pick_device() {
  local user_device
  user_device=$(train_opt device "$@")
  extra=()
  if [ -z "${DEVICE:-}" ]; then
    if [ -n "$user_device" ]; then DEVICE=$user_device
    elif [ "$(gpu_count)" -gt 0 ]; then DEVICE=cuda
    else DEVICE=cpu
    fi
  fi
  case "$DEVICE" in
  cpu | cuda) ;;
  *) die "DEVICE='$DEVICE': expected cpu or cuda" ;;
  esac
  [ -z "$user_device" ] || [ "$user_device" = "$DEVICE" ] ||
    die "DEVICE=$DEVICE but the train options say --device $user_device"
  device=$DEVICE
  [ -n "$user_device" ] || extra+=(--device "$device")
}

setup_ranks() {
  local per_host=$1
  shift
  local cores gpus user_threads
  # nproc alone would answer OMP_NUM_THREADS: the cores this shell may use.
  cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
  user_threads=$(train_opt threads "$@")
  mpi_opts=()
  mpi_user=()
  read -ra mpi_user <<<"${MPIRUN_ARGS:-}"

  if [ "$device" = cuda ]; then
    # One rank per GPU: lstream takes the GPU of its local rank itself (a
    # rank without one stops with "CUDA device index N is out of range").
    # Ranks are not pinned to cores; the GPU does the work.
    # (Not where the ranks run elsewhere: a cluster's launch host may have
    # no GPU; set check_gpus=0 before.)
    gpus=$(gpu_count)
    if [ "${check_gpus:-1}" = 0 ]; then
      :
    elif [ "$gpus" -eq 0 ]; then
      warn "DEVICE=cuda, but this host shows no GPU (nvidia-smi -L, CUDA_VISIBLE_DEVICES)"
    elif [ "$per_host" -gt "$gpus" ]; then
      die "$per_host ranks on a host with $gpus GPUs: each rank needs a GPU of its own"
    fi
    mpi_opts+=(--map-by slot --bind-to none)
  else
    # CPU ranks split the cores: OMP_NUM_THREADS for the ranks and, since
    # lstream sizes its thread pool by --threads (0 = every core it may run
    # on), --threads with the same number unless the options already say.
    # (Not for ranks on other hosts, threads_here=0: lstream computes its
    # share of its own host's cores where it runs.)
    local threads=${OMP_NUM_THREADS:-}
    [[ $threads =~ ^[1-9][0-9]*$ ]] || threads=$((cores / per_host))
    [ "$threads" -ge 1 ] || threads=1
    if [ -n "$user_threads" ] && [ "$user_threads" != 0 ]; then threads=$user_threads; fi
    if [ "${threads_here:-1}" != 0 ]; then
      export OMP_NUM_THREADS=$threads
      [ -n "$user_threads" ] || extra+=(--threads "$threads")
    fi
    # Ranks round-robin over the NUMA domains of a host, each bound to its
    # domain (its threads move freely inside it); more ranks than cores
    # share cores rather than fail.
    mpi_opts+=(--map-by numa --bind-to numa:overload-allowed)
  fi
  # A mapping or binding in MPIRUN_ARGS replaces ours.
  local o
  for o in "${mpi_user[@]}"; do
    case "$o" in
    -map-by | --map-by | -bind-to | --bind-to | -rank-by | --rank-by | -npernode | --npernode | \
      -ppr | --ppr | -rf | --rankfile | -cpu-list | --cpu-list)
      mpi_opts=()
      break
      ;;
    esac
  done

  # The environment every rank needs (mpirun copies only what -x names to
  # other hosts; on this one -x makes it explicit).
  export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
  local var
  while read -r var; do
    case "$var" in
    NCCL_* | UCX_* | OMP_NUM_THREADS | OMP_PROC_BIND | OMP_PLACES | OPENBLAS_NUM_THREADS | \
      CUDA_VISIBLE_DEVICES | CUDA_DEVICE_ORDER)
      mpi_opts+=(-x "$var")
      ;;
    esac
  done < <(compgen -e | sort)
}

show_cmd() {
  local first=1 a
  for a in "$@"; do
    [ $first = 1 ] || printf ' '
    printf '%q' "$a"
    first=0
  done
  printf '\n'
}

# launcher_opts ARGS...: the launcher's own leading options: -h/--help (the
# calling script's header comment), --dry-run (sets dry_run=1), -- (ends
# them). What follows is left in the array `rest`.
launcher_opts() {
  dry_run=0
  while [ $# -gt 0 ]; do
    case "$1" in
    -h | --help)
      sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
      exit 0
      ;;
    --dry-run) dry_run=1 ;;
    --) shift && break ;;
    *) break ;;
    esac
    shift
  done
  rest=("$@")
}
