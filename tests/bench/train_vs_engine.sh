#!/usr/bin/env bash
# End-to-end training rate against the engine's raw step rate, side by side.
#
# Builds a topic on the embedded broker (SERIES series x RECORDS records of
# F features, 16 partitions, lz4), then, ROUNDS times one after the other:
# `lstream bench engine` at the training shape (I = 2F inputs: each
# feature's level and change, the default), then `lstream train --until end`
# on the topic three ways, in an order that rotates by round (the run after
# the engine's meets other conditions than the later ones): with the default
# options, whose replay adds 4 more updates per step on recent windows; with
# --replay 0 (one update per step, what the engine's step rate measures);
# and the default with a snapshot every 10 steps. Prints each run, then the
# medians over the rounds: windows/s, the ratios to the engine within a
# round, the share of time the trainer waited for data, and the step-time
# cost of the snapshots (within a round, against the default training).
#
# Usage: tests/bench/train_vs_engine.sh [BUILD_DIR]
#   env: B (256) F (8) H (128) L (2) T (32) SERIES (1024) RECORDS (1025)
#        ROUNDS (3)
set -euo pipefail
build=${1:-build}
lstream="$build/lstream"
[ -x "$lstream" ] || { echo "no $lstream: build first" >&2; exit 1; }
B=${B:-256} F=${F:-8} H=${H:-128} L=${L:-2} T=${T:-32}
SERIES=${SERIES:-1024} RECORDS=${RECORDS:-1025} ROUNDS=${ROUNDS:-3}
. "$(dirname "$0")/lib.sh"
bench_broker --topic bench:16
"$lstream" produce --brokers "$bootstrap" --topic bench --series "$SERIES" --features "$F" \
  --records-per-series "$RECORDS" --generator sine --seed 1 2>/dev/null

# The machine is shared: compare within a round, take medians.
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}'; }
field() { sed -n "s/^summary.* $1=\([0-9.]*\).*/\1/p"; }
train=("$lstream" train --brokers "$bootstrap" --topic bench --features "$F" --window "$T"
  --batch "$B" --hidden "$H" --layers "$L" --until end --quiet)
kinds=(default replay0 snapshots)
: >"$work/rounds"
for round in $(seq "$ROUNDS"); do
  engine=$("$lstream" bench engine --no-sgemm --steps 10 --shape "$B,$((2 * F)),$H,$L,$T")
  echo "round $round: $engine"
  ms=$(echo "$engine" | sed -n 's/.*ms_per_step=\([0-9.]*\).*/\1/p')
  declare -A wps=() waits=()
  for i in 0 1 2; do
    kind=${kinds[$(((i + round - 1) % 3))]}
    case $kind in
      default) extra=() ;;
      replay0) extra=(--replay 0) ;;
      snapshots)
        rm -rf "$work/snaps"
        extra=(--snapshot-dir "$work/snaps" --snapshot-every 10 --resume none) ;;
    esac
    out=$("${train[@]}" "${extra[@]}")
    echo "round $round $kind: $(echo "$out" | grep -E '^(summary|snapshots)' | tr '\n' ' ')"
    wps[$kind]=$(echo "$out" | field windows_per_s)
    waits[$kind]=$(echo "$out" | field wait_share)
  done
  # columns: engine windows/s; default windows/s and wait; replay-0 windows/s
  # and wait; with snapshots windows/s
  echo "$(awk -v ms="$ms" -v b="$B" 'BEGIN {print b / (ms / 1000)}') ${wps[default]}" \
    "${waits[default]} ${wps[replay0]} ${waits[replay0]} ${wps[snapshots]}" >>"$work/rounds"
done
col() { cut -d' ' -f"$1" "$work/rounds" | median; }
e=$(col 1)
r1=$(awk '{print $2 / $1}' "$work/rounds" | median)
r0=$(awk '{print $4 / $1}' "$work/rounds" | median)
cost=$(awk '{print ($2 / $6 - 1) * 100}' "$work/rounds" | median)
printf "train_vs_engine B=%d rounds=%d engine_windows_per_s=%.1f\n" "$B" "$ROUNDS" "$e"
printf "train_vs_engine replay=default train_windows_per_s=%.1f ratio=%.3f wait_share=%.4f (4 replay updates per step)\n" "$(col 2)" "$r1" "$(col 3)"
printf "train_vs_engine replay=0 train_windows_per_s=%.1f ratio=%.3f wait_share=%.4f\n" "$(col 4)" "$r0" "$(col 5)"
printf "snapshot_cost every=10 windows_per_s_without=%.1f with=%.1f step_time_cost=%.2f%%\n" "$(col 2)" "$(col 6)" "$cost"
