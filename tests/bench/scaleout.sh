#!/usr/bin/env bash
# Replicas on one machine: the gradient all-reduce's cost, and what
# overlapping it with backward buys, measured side by side in one run.
#
# 1. `mpirun -np NP lstream bench comm` at the benchmark shapes' gradient
#    sizes: one all-reduce of the buffer vs one per segment.
# 2. The same replayed topic trained by NP ranks with --overlap true and
#    false, alternating ROUNDS times, each run's seconds and the time its
#    ranks were blocked in the step's sums (comm_s); medians and the ratio.
#
# Usage: tests/bench/scaleout.sh [BUILD_DIR] [ROUNDS]
#   env: NP (2) DEVICE (cpu) B (256) F (8) H (128) L (2) T (32)
#        SERIES (512) RECORDS (513) THREADS (cores / NP, per rank)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
rounds=${2:-3}
lstream="$build/lstream"
[ -x "$lstream" ] || { echo "no $lstream: build first" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "no mpirun: install openmpi-bin" >&2; exit 1; }
NP=${NP:-2} DEVICE=${DEVICE:-cpu}
B=${B:-256} F=${F:-8} H=${H:-128} L=${L:-2} T=${T:-32}
SERIES=${SERIES:-512} RECORDS=${RECORDS:-513}
THREADS=${THREADS:-$(($(nproc) / NP > 0 ? $(nproc) / NP : 1))}
source "$here/../train/lib.sh"
mpi_env

median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }

echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), $(date -u +%F); NP=$NP device=$DEVICE threads/rank=$THREADS"
timeout 300 mpirun -np "$NP" "$lstream" bench comm --device "$DEVICE" --reps 30

start_broker --topic scale:16
"$lstream" produce --brokers "$bootstrap" --topic scale --series "$SERIES" --features "$F" \
  --records-per-series "$RECORDS" --generator sine --seed 1 >/dev/null
args=(train --brokers "$bootstrap" --topic scale --features "$F" --window "$T" --batch "$B"
  --hidden "$H" --layers "$L" --device "$DEVICE" --threads "$THREADS" --until end --quiet)
declare -A secs comm
for r in $(seq "$rounds"); do
  for ov in true false; do
    out=$(timeout 600 mpirun -np "$NP" "$lstream" "${args[@]}" --overlap "$ov")
    secs[$ov]+="$(field <(echo "$out") summary seconds) "
    comm[$ov]+="$(field <(echo "$out") summary comm_s) "
    echo "round $r overlap=$ov $(echo "$out" | grep '^summary')"
  done
done
for ov in true false; do
  s=$(printf '%s\n' ${secs[$ov]} | median)
  c=$(printf '%s\n' ${comm[$ov]} | median)
  echo "scaleout np=$NP B=$B F=$F H=$H L=$L T=$T overlap=$ov seconds=$s comm_s=$c"
  eval "sec_$ov=$s"
done
# shellcheck disable=SC2154 # set by the eval above
awk -v a="$sec_true" -v b="$sec_false" 'BEGIN {printf "overlap_speedup=%.3f (seconds without / with)\n", b / a}'
