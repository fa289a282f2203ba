#!/usr/bin/env bash
# End-to-end training rate against the engine's raw step rate.
#
# Builds a topic on the embedded broker (SERIES series x RECORDS records of
# F features, 16 partitions, lz4), then runs `lstream bench engine` at the
# training shape (I = 2F inputs: each feature's level and change, the
# default) and `lstream train --until end` on the topic twice: with the
# default options, whose replay adds 4 more updates per step on recent
# windows, and with --replay 0 (one update per step, what the engine's step
# rate measures), ROUNDS times alternating; it prints the median windows/s,
# the median ratios to the engine within a round, and the share of time the
# trainer waited for data; then the default training with a snapshot every
# 10 steps, and the step-time cost of those snapshots.
#
# Usage: tests/bench/train_vs_engine.sh [BUILD_DIR]
#   env: B (256) F (8) H (128) L (2) T (32) SERIES (1024) RECORDS (1025)
#        ROUNDS (3): ratios are medians over the rounds
set -euo pipefail
build=${1:-build}
lstream="$build/lstream"
[ -x "$lstream" ] || { echo "no $lstream: build first" >&2; exit 1; }
B=${B:-256} F=${F:-8} H=${H:-128} L=${L:-2} T=${T:-32}
SERIES=${SERIES:-1024} RECORDS=${RECORDS:-1025} ROUNDS=${ROUNDS:-3}
work=$(mktemp -d)
broker_pid=
cleanup() {
  [ -n "$broker_pid" ] && kill "$broker_pid" 2>/dev/null && wait "$broker_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
"$lstream" broker --topic bench:16 --bootstrap-file "$work/bootstrap" >/dev/null 2>&1 &
broker_pid=$!
while [ ! -s "$work/bootstrap" ]; do sleep 0.1; done
bootstrap=$(cat "$work/bootstrap")
"$lstream" produce --brokers "$bootstrap" --topic bench --series "$SERIES" --features "$F" \
  --records-per-series "$RECORDS" --generator sine --seed 1 2>/dev/null

# ROUNDS rounds, alternating the engine, the default training and the one
# without replay (the machine is shared: compare within a round, take medians).
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}'; }
: >"$work/rounds"
for round in $(seq "$ROUNDS"); do
  engine=$("$lstream" bench engine --no-sgemm --steps 10 --shape "$B,$((2 * F)),$H,$L,$T")
  echo "$engine"
  ms=$(echo "$engine" | sed -n 's/.*ms_per_step=\([0-9.]*\).*/\1/p')
  line="$round $(awk -v ms="$ms" -v b="$B" 'BEGIN {print b / (ms / 1000)}')"
  for replay in default 0; do
    extra=()
    [ "$replay" = default ] || extra=(--replay "$replay")
    out=$("$lstream" train --brokers "$bootstrap" --topic bench --features "$F" --window "$T" \
      --batch "$B" --hidden "$H" --layers "$L" --until end --quiet "${extra[@]}")
    echo "$out" | grep '^summary' | sed "s/^/replay=$replay /"
    w=$(echo "$out" | sed -n 's/^summary.* windows_per_s=\([0-9.]*\).*/\1/p')
    ws=$(echo "$out" | sed -n 's/^summary.* wait_share=\([0-9.]*\).*/\1/p')
    line="$line $w $ws"
  done
  echo "$line" >>"$work/rounds"
done
# columns: round, engine windows/s, default windows/s and wait, replay-0 windows/s and wait
e=$(cut -d' ' -f2 "$work/rounds" | median)
wps=$(cut -d' ' -f3 "$work/rounds" | median)
w0=$(cut -d' ' -f5 "$work/rounds" | median)
r1=$(awk '{print $3 / $2}' "$work/rounds" | median)
r0=$(awk '{print $5 / $2}' "$work/rounds" | median)
ws1=$(cut -d' ' -f4 "$work/rounds" | median)
ws0=$(cut -d' ' -f6 "$work/rounds" | median)
printf "train_vs_engine B=%d rounds=%d engine_windows_per_s=%.1f\n" "$B" "$ROUNDS" "$e"
printf "train_vs_engine replay=default train_windows_per_s=%.1f ratio=%.3f wait_share=%.4f (4 replay updates per step)\n" "$wps" "$r1" "$ws1"
printf "train_vs_engine replay=0 train_windows_per_s=%.1f ratio=%.3f wait_share=%.4f\n" "$w0" "$r0" "$ws0"
snap=$("$lstream" train --brokers "$bootstrap" --topic bench --features "$F" --window "$T" \
  --batch "$B" --hidden "$H" --layers "$L" --until end --quiet \
  --snapshot-dir "$work/snaps" --snapshot-every 10 --resume none)
echo "$snap" | grep -E '^(summary|snapshots)'
swps=$(echo "$snap" | sed -n 's/^summary.* windows_per_s=\([0-9.]*\).*/\1/p')
awk -v a="$wps" -v b="$swps" 'BEGIN {
  printf "snapshot_cost every=10 windows_per_s_without=%.1f with=%.1f step_time_cost=%.2f%%\n", a, b, (a / b - 1) * 100
}'
