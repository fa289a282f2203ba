#!/usr/bin/env bash
# End-to-end training rate against the engine's raw step rate, side by side.
#
# Builds a topic on the embedded broker (SERIES series x RECORDS records of
# F features, 16 partitions, lz4), then, ROUNDS times one after the other:
# `lstream bench engine` at the training shape (I = 2F inputs: each
# feature's level and change, the default), then `lstream train --until end`
# on the topic four ways, in an order that rotates by round (the run after
# the engine's meets other conditions than the later ones): with the default
# options, whose replay adds 4 more updates per step on recent windows; with
# --replay 0 (one update per step, what the engine's step rate measures);
# and each of these with a snapshot every 10 steps. Prints each run, then the
# medians over the rounds: windows/s, the ratios to the engine within a
# round, the share of time the trainer waited for data, and the step-time
# cost of the snapshots (within a round, against the same training without).
#
# Two rates per training: end to end (windows over the run's seconds, the
# wait for data included: the first step waits until every partition has
# filled its look-ahead of --queue-windows windows or ended, here the whole
# topic), and stepping (the same over the seconds not spent waiting for data,
# seconds x (1 - wait_share): the step pipeline's own pace, what the engine's
# step rate is compared with).
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
kinds=(default replay0 snapshots snapshots0)
snap_args() { rm -rf "$work/snaps"; extra+=(--snapshot-dir "$work/snaps" --snapshot-every 10 --resume none); }
: >"$work/rounds"
for round in $(seq "$ROUNDS"); do
  engine=$("$lstream" bench engine --no-sgemm --steps 10 --shape "$B,$((2 * F)),$H,$L,$T")
  echo "round $round: $engine"
  ms=$(echo "$engine" | sed -n 's/.*ms_per_step=\([0-9.]*\).*/\1/p')
  declare -A wps=() waits=()
  for i in 0 1 2 3; do
    kind=${kinds[$(((i + round - 1) % 4))]}
    case $kind in
      default) extra=() ;;
      replay0) extra=(--replay 0) ;;
      snapshots) extra=() && snap_args ;;
      snapshots0) extra=(--replay 0) && snap_args ;;
    esac
    out=$("${train[@]}" "${extra[@]}")
    echo "round $round $kind: $(echo "$out" | grep -E '^(summary|snapshots)' | tr '\n' ' ')"
    wps[$kind]=$(echo "$out" | field windows_per_s)
    waits[$kind]=$(echo "$out" | field wait_share)
  done
  # columns: engine windows/s; default windows/s and wait; replay-0 windows/s
  # and wait; with snapshots windows/s, default and replay 0
  echo "$(awk -v ms="$ms" -v b="$B" 'BEGIN {print b / (ms / 1000)}') ${wps[default]}" \
    "${waits[default]} ${wps[replay0]} ${waits[replay0]} ${wps[snapshots]}" \
    "${wps[snapshots0]}" >>"$work/rounds"
done
col() { cut -d' ' -f"$1" "$work/rounds" | median; }
e=$(col 1)
# per round: end-to-end ratio, stepping rate (waits for data left out) and its ratio
rates() { awk -v w="$1" -v s="$2" '{r = $w / (1 - $s); print $w / $1, r, r / $1}' "$work/rounds"; }
rates 2 3 >"$work/r1" && rates 4 5 >"$work/r0"
m() { cut -d' ' -f"$2" "$work/$1" | median; }
cost() { awk -v a="$1" -v b="$2" '{print ($a / $b - 1) * 100}' "$work/rounds" | median; }
printf "train_vs_engine B=%d F=%d H=%d L=%d T=%d series=%d records=%d rounds=%d engine_windows_per_s=%.1f\n" \
  "$B" "$F" "$H" "$L" "$T" "$SERIES" "$RECORDS" "$ROUNDS" "$e"
printf "train_vs_engine replay=default train_windows_per_s=%.1f ratio=%.3f wait_share=%.4f stepping_windows_per_s=%.1f stepping_ratio=%.3f (4 replay updates per step)\n" \
  "$(col 2)" "$(m r1 1)" "$(col 3)" "$(m r1 2)" "$(m r1 3)"
printf "train_vs_engine replay=0 train_windows_per_s=%.1f ratio=%.3f wait_share=%.4f stepping_windows_per_s=%.1f stepping_ratio=%.3f\n" \
  "$(col 4)" "$(m r0 1)" "$(col 5)" "$(m r0 2)" "$(m r0 3)"
printf "snapshot_cost every=10 replay=default windows_per_s_without=%.1f with=%.1f step_time_cost=%.2f%%\n" "$(col 2)" "$(col 6)" "$(cost 2 6)"
printf "snapshot_cost every=10 replay=0 windows_per_s_without=%.1f with=%.1f step_time_cost=%.2f%%\n" "$(col 4)" "$(col 7)" "$(cost 4 7)"
