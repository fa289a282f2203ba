#!/usr/bin/env bash
# End-to-end training rate against the engine's raw step rate, side by side.
#
# Builds a topic on the embedded broker (SERIES series x RECORDS records of
# F features, 16 partitions, lz4), then, ROUNDS times one after the other:
# `lstream bench engine` at the training shape, then `lstream train --until
# end` on the topic and the same training with a snapshot every 10 steps
# (in turn first). Prints each run, then the medians: train / engine
# windows/s, the share of time the trainer waited for data, and the
# step-time cost of the snapshots.
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

field() { sed -n "s/^$1.* $2=\([0-9.]*\).*/\1/p"; }
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
train=("$lstream" train --brokers "$bootstrap" --topic bench --features "$F" --window "$T"
  --batch "$B" --hidden "$H" --layers "$L" --until end --quiet)
eng=() plain=() waits=() snap=()
for r in $(seq "$ROUNDS"); do
  out=$("$lstream" bench engine --no-sgemm --steps 10 --shape "$B,$F,$H,$L,$T")
  echo "round $r: $out"
  eng+=("$(echo "$out" | sed -n 's/.*ms_per_step=\([0-9.]*\).*/\1/p')")
  # Plain and with snapshots in turn first: the run after the engine's
  # meets other conditions (caches, the broker) than the next one.
  for kind in $(if ((r % 2)); then echo plain snap; else echo snap plain; fi); do
    if [ "$kind" = plain ]; then
      out=$("${train[@]}")
      echo "round $r: $(echo "$out" | grep '^summary')"
      plain+=("$(echo "$out" | field summary windows_per_s)")
      waits+=("$(echo "$out" | field summary wait_share)")
    else
      rm -rf "$work/snaps"
      out=$("${train[@]}" --snapshot-dir "$work/snaps" --snapshot-every 10 --resume none)
      echo "round $r (snapshots): $(echo "$out" | grep -E '^(summary|snapshots)' | tr '\n' ' ')"
      snap+=("$(echo "$out" | field summary windows_per_s)")
    fi
  done
done
ms=$(printf '%s\n' "${eng[@]}" | median)
wps=$(printf '%s\n' "${plain[@]}" | median)
wait_share=$(printf '%s\n' "${waits[@]}" | median)
swps=$(printf '%s\n' "${snap[@]}" | median)
awk -v ms="$ms" -v b="$B" -v w="$wps" -v ws="$wait_share" -v n="$ROUNDS" 'BEGIN {
  e = b / (ms / 1000)
  printf "train_vs_engine B=%d rounds=%d engine_windows_per_s=%.1f train_windows_per_s=%.1f ratio=%.3f wait_share=%.4f\n", b, n, e, w, w / e, ws
}'
awk -v a="$wps" -v b="$swps" 'BEGIN {
  printf "snapshot_cost every=10 windows_per_s_without=%.1f with=%.1f step_time_cost=%.2f%%\n", a, b, (a / b - 1) * 100
}'
