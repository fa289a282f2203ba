#!/usr/bin/env bash
# Replicas on a cluster of hosts listed in an Open MPI hostfile: one
# `lstream train` rank per slot (per GPU when the slots are the GPUs),
# started with mpirun.
#
# Usage: examples/launch_cluster.sh [--dry-run] HOSTFILE [--] TRAIN_OPTIONS...
#   e.g. examples/launch_cluster.sh hosts --brokers kafka1:9092 --topic ticks \
#          --features 2 --snapshot-dir /shared/lstream/ticks --snapshot-every 500
#
# HOSTFILE holds one host a line as Open MPI reads it, "HOST slots=N"
# (# starts a comment); make N the GPUs of the host for GPU ranks. Ranks fill
# the hosts in order, so each host's ranks have local ranks 0..N-1 and rank
# r uses the GPU of its local rank on its host (slots <= GPUs per host).
# TRAIN_OPTIONS go to `lstream train` unchanged (see `lstream train --help`);
# the script adds --device unless they already say (on the command line or
# in a --config file). CPU ranks left without --threads take their share of
# their own host's cores (cores / ranks on that host), computed where they
# run; the bits do not depend on the thread count (the CPU's instruction set
# does: LSTREAM_CPU_KERNELS forces one on every host).
#   --dry-run    print the command instead of running it
#   -h, --help   this text
#
# What every host needs:
#   - the lstream binary at the same absolute path (a shared file system or
#     the same install on each host), with its libraries: PATH and
#     LD_LIBRARY_PATH of this shell go to the ranks;
#   - the Kafka brokers at the --brokers address: the ranks connect from
#     their own hosts, so 127.0.0.1 or localhost works only on one host;
#   - rank r reads the partitions p with p % NP == rank, so every partition
#     is read by exactly one host, and the topic needs at least NP partitions
#     for every rank to have data (others join each step with nothing);
#   - --snapshot-dir on a file system every host shares (each rank writes its
#     shard there and the snapshot is committed in lockstep; a restart, with
#     this or another NP, reads all shards).
#
# Environment:
#   NP           ranks [the sum of the hostfile's slots]
#   DEVICE       cuda or cpu [cuda when this host shows GPUs, else cpu; set it
#                when launching from a host without GPUs]
#   LSTREAM      the lstream binary [build/lstream of this repository]
#   MPIRUN       the mpirun command [mpirun]
#   MPIRUN_ARGS  more mpirun options, split on spaces (e.g. --prefix DIR when
#                Open MPI is not on the remote PATH, --oversubscribe); a
#                --map-by or --bind-to there replaces the script's own
#   MPI_IFACE    the network for MPI's TCP traffic, best as a subnet
#                (MPI_IFACE=10.0.0.0/24): --mca btl_tcp_if_include and
#                oob_tcp_if_include, valid on every host, this one included.
#                An interface name (ib0) is used the same way when this host
#                has it; when only the nodes have it, it goes to the ranks
#                alone (OMPI_MCA_btl_tcp_if_include; mpirun's own wire-up then
#                picks its interfaces), with a warning. A name is also
#                NCCL_SOCKET_IFNAME unless that is set
#   NCCL_DEBUG   NCCL's log level for the ranks [WARN]; every NCCL_* variable
#                that is set goes to the ranks too (-x), NCCL_SOCKET_IFNAME
#                (interface for NCCL's sockets) and NCCL_IB_HCA (InfiniBand
#                adapters) among them
#   UCX_NET_DEVICES
#                UCX's devices (Open MPI over UCX); every UCX_* variable that
#                is set goes to the ranks
#   OMP_NUM_THREADS
#                CPU ranks: threads per rank, the same on every host [unset:
#                each rank takes its share of its own host's cores]
#   LSTREAM_CPU_KERNELS, LSTREAM_CPU_ADAPT
#                if set, go to the ranks: the CPU kernels every rank runs
#                (the same bits on hosts of other CPUs), the threads' adaptation
#                to a competing load (0: off)
#   CUDA_VISIBLE_DEVICES
#                if set, goes to the ranks (the same on every host)
#
# Mapping: GPU ranks are not pinned (--bind-to none); CPU ranks go
# round-robin over the NUMA domains of their host, each bound to its domain.
set -euo pipefail
prog=launch_cluster.sh
repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=launch_common.sh
source "$repo/examples/launch_common.sh"

launcher_opts "$@"
set -- ${rest[@]+"${rest[@]}"}
[ $# -gt 0 ] || die "no hostfile; usage: $prog [--dry-run] HOSTFILE [--] TRAIN_OPTIONS... (see --help)"
hostfile=$1
shift
[ "${1:-}" != -- ] || shift
case "$hostfile" in
-*) die "'$hostfile' is not a hostfile; usage: $prog [--dry-run] HOSTFILE [--] TRAIN_OPTIONS..." ;;
esac
[ -e "$hostfile" ] || die "hostfile '$hostfile': no such file"
if [ ! -f "$hostfile" ] || [ ! -r "$hostfile" ]; then die "hostfile '$hostfile': not a readable file"; fi
hostfile=$(cd "$(dirname "$hostfile")" && pwd)/$(basename "$hostfile")
[ $# -gt 0 ] || die "no train options (at least --brokers HOST:PORT --topic NAME); see --help"

# The hostfile: total slots, the most on one host, hosts without slots=N.
read -r hosts total per_host unslotted < <(awk '
  { sub(/#.*/, "") }
  NF == 0 { next }
  {
    n = -1
    for (i = 2; i <= NF; i++) if ($i ~ /^slots=/) { n = substr($i, 7) }
    if (n == -1) { unslotted++; n = 0 }
    else if (n !~ /^[0-9]+$/ && !bad) bad = NR
    if (!($1 in slots)) hosts++
    slots[$1] += n; total += n
  }
  END {
    if (bad) { print "bad", bad, 0, 0; exit }
    m = 0
    for (h in slots) if (slots[h] > m) m = slots[h]
    print hosts + 0, total + 0, m, unslotted + 0
  }' "$hostfile")
[ "$hosts" != bad ] || die "hostfile '$hostfile', line $total: expected slots=N with N a number"
[ "$hosts" -gt 0 ] || die "hostfile '$hostfile' lists no host"
if [ -z "${NP:-}" ]; then
  [ "$unslotted" = 0 ] ||
    die "hostfile '$hostfile': $unslotted host line(s) without slots=N; add slots= or set NP"
  NP=$total
  [ "$NP" -gt 0 ] || die "hostfile '$hostfile': no slots (slots=0 everywhere); add slots= or set NP"
fi
check_np
# With NP set and hosts without slots=, assume the ranks spread evenly.
[ "$unslotted" = 0 ] || per_host=$(((NP + hosts - 1) / hosts))
[ "$per_host" -le "$NP" ] || per_host=$NP
[ "$per_host" -ge 1 ] || per_host=1

find_lstream
find_mpirun
pick_device "$@"
# The GPUs and cores are on the hosts, not necessarily here: no GPU check on
# this one, and CPU ranks count their threads where they run.
check_gpus=0
threads_here=0
setup_ranks "$per_host" "$@"

# Multi-host environment: where the binary and its libraries are, and which
# network MPI and NCCL use.
for var in PATH LD_LIBRARY_PATH LSTREAM_CPU_KERNELS LSTREAM_CPU_ADAPT; do
  [ -z "${!var:-}" ] || mpi_opts+=(-x "$var")
done
if [ -n "${MPI_IFACE:-}" ]; then
  if [[ $MPI_IFACE == */* ]] || [ -e "/sys/class/net/$MPI_IFACE" ]; then
    mpi_opts+=(--mca btl_tcp_if_include "$MPI_IFACE" --mca oob_tcp_if_include "$MPI_IFACE")
  else
    # mpirun would apply it here too and stop at once ("None of the TCP
    # networks specified ... could be found"): the ranks alone take it.
    warn "MPI_IFACE=$MPI_IFACE is no interface of this host: only the ranks use it" \
      "(mpirun's wire-up picks its own); a subnet such as MPI_IFACE=10.0.0.0/24 applies" \
      "on every host, this one included"
    mpi_opts+=(-x "OMPI_MCA_btl_tcp_if_include=$MPI_IFACE")
  fi
  if [ -z "${NCCL_SOCKET_IFNAME:-}" ] && [[ $MPI_IFACE != */* ]]; then
    mpi_opts+=(-x "NCCL_SOCKET_IFNAME=$MPI_IFACE")
  fi
fi

brokers=$(train_opt brokers "$@")
if [[ $brokers =~ (^|,)(localhost|127\.[0-9.]+|\[?::1\]?)(:|,|$) ]] &&
  awk '{ sub(/#.*/, "") } NF && $1 != "localhost" && $1 !~ /^127\./ { found = 1 } END { exit !found }' \
    "$hostfile"; then
  warn "--brokers $brokers is a loopback address: ranks on other hosts will not reach it"
fi

cmd=("$mpirun" --hostfile "$hostfile" -np "$NP" "${mpi_opts[@]}" "${mpi_user[@]}"
  "$lstream" train "$@" "${extra[@]}")
if [ $dry_run = 1 ]; then
  show_cmd "${cmd[@]}"
  exit 0
fi
exec "${cmd[@]}"
