#!/usr/bin/env bash
# The launch scripts of examples/ (launch_local.sh, launch_cluster.sh) on the
# embedded broker, CPU ranks.
#
# Usage: examples_test.sh LSTREAM
#   - launch_local.sh with NP=2 DEVICE=cpu, launch_cluster.sh with the
#     hostfile "localhost slots=2", and plain `mpirun -np 2 lstream train`
#     with the same options print the same digests (2 ranks are
#     bit-identical) and train every record of the topic
#   - --help of both exits 0; a missing hostfile, a bad NP, a missing binary
#     and a missing mpirun give an error and a non-zero exit
#   - --dry-run shows what the scripts add: --device, --threads and
#     OMP_NUM_THREADS for CPU ranks of launch_local.sh (launch_cluster.sh
#     leaves the count to each rank, where it runs), NCCL_* pass-through,
#     MPIRUN_ARGS, MPI_IFACE as an interface of this host, as a subnet, and
#     as an interface only the nodes have (the ranks alone take it)
#   - launch_cluster.sh without --threads: each rank takes its share of its
#     host's cores (the summary's threads=), computed where it runs
set -euo pipefail
lstream=$1
here=$(cd "$(dirname "$0")" && pwd)
examples=$(cd "$here/../../examples" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"
mpi_env # root and oversubscription through OMPI_* variables: no MPIRUN_ARGS needed
export LSTREAM=$lstream

# Usage and errors (no broker needed).
"$examples/launch_local.sh" --help >"$work/help_local" || fail "launch_local.sh --help exited $?"
"$examples/launch_cluster.sh" --help >"$work/help_cluster" || fail "launch_cluster.sh --help exited $?"
for v in NP DEVICE LSTREAM MPIRUN_ARGS NCCL_DEBUG OMP_NUM_THREADS; do
  grep -q "^  $v" "$work/help_local" || fail "launch_local.sh --help does not explain $v"
done
for v in NP MPI_IFACE NCCL_SOCKET_IFNAME NCCL_IB_HCA UCX_NET_DEVICES LD_LIBRARY_PATH; do
  grep -q "$v" "$work/help_cluster" || fail "launch_cluster.sh --help does not explain $v"
done
expect_error() { # PATTERN CMD...: CMD exits non-zero with PATTERN on stderr
  local pattern=$1 rc=0
  shift
  "$@" >"$work/err.out" 2>"$work/err" || rc=$?
  [ $rc -ne 0 ] || fail "$* exited 0"
  grep -q "$pattern" "$work/err" || fail "$*: no '$pattern' in: $(cat "$work/err")"
}
expect_error "hostfile '$work/nohosts': no such file" \
  "$examples/launch_cluster.sh" "$work/nohosts" --brokers x:1 --topic t
expect_error "no hostfile" "$examples/launch_cluster.sh"
expect_error "NP='two'" env NP=two "$examples/launch_local.sh" --brokers x:1 --topic t
expect_error "no lstream binary at $work/none" env NP=2 LSTREAM="$work/none" \
  "$examples/launch_local.sh" --brokers x:1 --topic t
expect_error "'$work/mpirun' not found" env NP=2 DEVICE=cpu MPIRUN="$work/mpirun" \
  "$examples/launch_local.sh" --brokers x:1 --topic t

# What the scripts add (--dry-run prints the command).
dry=$(NP=2 DEVICE=cpu NCCL_IB_HCA=mlx5_0 MPIRUN_ARGS="--report-bindings" \
  "$examples/launch_local.sh" --dry-run --brokers x:1 --topic t)
for s in "-np 2 " "-x OMP_NUM_THREADS" "-x NCCL_DEBUG" "-x NCCL_IB_HCA" "--report-bindings" \
  " train --brokers x:1 --topic t --device cpu --threads "; do
  [[ $dry == *"$s"* ]] || fail "launch_local.sh --dry-run: no '$s' in: $dry"
done
echo "localhost slots=2" >"$work/hosts"
dry=$(MPI_IFACE=lo "$examples/launch_cluster.sh" --dry-run "$work/hosts" --brokers x:1 --topic t \
  --threads 1)
for s in "--hostfile $work/hosts -np 2 " "--mca btl_tcp_if_include lo" "-x PATH" \
  "-x NCCL_SOCKET_IFNAME=lo" " train --brokers x:1 --topic t --threads 1 --device cpu"; do
  [[ $dry == *"$s"* ]] || fail "launch_cluster.sh --dry-run: no '$s' in: $dry"
done
[[ $dry != *"--threads 1 --device cpu --threads"* ]] || fail "--threads added twice: $dry"
# The launch host's cores say nothing of the nodes': no thread count added.
dry=$(env -u OMP_NUM_THREADS MPI_IFACE=10.0.0.0/24 "$examples/launch_cluster.sh" --dry-run \
  "$work/hosts" --brokers x:1 --topic t)
for s in "--mca btl_tcp_if_include 10.0.0.0/24 --mca oob_tcp_if_include 10.0.0.0/24" \
  " train --brokers x:1 --topic t --device cpu"; do
  [[ $dry == *"$s"* ]] || fail "launch_cluster.sh --dry-run (subnet): no '$s' in: $dry"
done
[[ $dry != *"--threads"* && $dry != *"OMP_NUM_THREADS"* && $dry != *"NCCL_SOCKET_IFNAME"* ]] ||
  fail "launch_cluster.sh: a thread count from the launch host, or a subnet as an interface: $dry"
# An interface only the nodes have: mpirun here must not be given it.
dry=$(env -u OMP_NUM_THREADS MPI_IFACE=nosuch0 "$examples/launch_cluster.sh" --dry-run \
  "$work/hosts" --brokers x:1 --topic t 2>"$work/warn")
[[ $dry == *"-x OMPI_MCA_btl_tcp_if_include=nosuch0"* && $dry != *"--mca"*"nosuch0"* ]] ||
  fail "launch_cluster.sh --dry-run (an interface of the nodes only): $dry"
grep -q "MPI_IFACE=nosuch0 is no interface of this host.*MPI_IFACE=10.0.0.0/24" "$work/warn" ||
  fail "no warning for an interface this host lacks: $(cat "$work/warn")"

# The same 2-rank run three ways. --threads 1: the engine's thread count is
# part of the model's arithmetic, and plain mpirun binds each rank to one core.
start_broker --topic ex:5
"$lstream" produce --brokers "$bootstrap" --topic ex --series 40 --features 2 \
  --records-per-series 240 --generator sine --seed 9 >/dev/null
common=(--brokers "$bootstrap" --topic ex --features 2 --window 6 --batch 20 --hidden 10
  --layers 2 --lr 0.01 --until end --quiet)
args=("${common[@]}" --threads 1)
NP=2 DEVICE=cpu timeout 120 "$examples/launch_local.sh" "${args[@]}" >"$work/local" ||
  fail "launch_local.sh exited $?"
timeout 120 "$examples/launch_cluster.sh" "$work/hosts" "${args[@]}" >"$work/cluster" ||
  fail "launch_cluster.sh exited $?"
timeout 120 mpirun -np 2 "$lstream" train "${args[@]}" >"$work/plain" || fail "mpirun exited $?"
# Without --threads: each rank's share of this host's cores, where it runs.
online=$(getconf _NPROCESSORS_ONLN)
share=$((online / 2))
[ $share -ge 1 ] || share=1
env -u OMP_NUM_THREADS timeout 120 "$examples/launch_cluster.sh" "$work/hosts" "${common[@]}" \
  >"$work/share" || fail "launch_cluster.sh without --threads exited $?"
[ "$(field "$work/share" summary threads)" = $share ] ||
  fail "ranks without --threads: $(grep '^summary' "$work/share"), expected threads=$share"
runs="local cluster plain"
[ $share != 1 ] || runs="$runs share" # the same thread count: the same bits
for run in $runs; do
  grep '^summary' "$work/$run"
  records=$(field "$work/$run" summary records)
  # 40 series x 240 records; a series' first record is only an input.
  [ "$records" = $((40 * 239)) ] || fail "$run: trained $records records, expected 9560"
  d=$(grep '^digest' "$work/$run") || fail "$run: no digest line"
  [ "$d" = "$(grep '^digest' "$work/plain")" ] || fail "$run: '$d' differs from plain mpirun"
done
echo "PASS: examples_launch"
