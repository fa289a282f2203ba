#!/usr/bin/env bash
# Training throughput with and without forecasts going out, at the engine
# benchmark's first shape (`lstream bench engine`: B 256, I 8, H 128, L 2,
# T 32; I = 2F with the default level and change inputs, so F = 4).
#
# Builds a topic on the embedded broker (SERIES series x RECORDS records,
# PARTITIONS partitions), then replays it (`train --until end`) ROUNDS
# times, alternating four set-ups within a round: no forecasts; next
# forecasts to a topic (the default kind); next and eval forecasts to a
# topic; next and eval to a topic and a CSV file. Each run publishes to a
# fresh topic, and its time includes committing every forecast at the end.
# Prints per set-up the median windows/s and the median ratio to the run
# without forecasts in the same round (the machine may be shared: compare
# within a round), and the CPU seconds per 1000 windows of the trainer
# (median, and its ratio) and of the broker, with the default replay (4
# more updates a step) and, with REPLAY0=1, also with --replay 0 (a step's
# compute at its smallest, so forecasts cost the most). SETUPS picks the
# set-ups (the four above by default); two more price horizons and
# quantiles: h12 (next forecasts to a topic, `--horizon 12`) and h12q (also
# `--quantiles 0.1,0.5,0.9`), e.g. SETUPS="next h12 h12q".
#
# Usage: tests/bench/predict_cost.sh [BUILD_DIR]
#   env: SERIES (512) RECORDS (257) PARTITIONS (4) ROUNDS (3) REPLAY0 (0) SETUPS
set -euo pipefail
build=${1:-build}
lstream="$build/lstream"
[ -x "$lstream" ] || { echo "no $lstream: build first" >&2; exit 1; }
SERIES=${SERIES:-512} RECORDS=${RECORDS:-257} PARTITIONS=${PARTITIONS:-4} ROUNDS=${ROUNDS:-3}
REPLAY0=${REPLAY0:-0}
. "$(dirname "$0")/lib.sh"
bench_broker --topic bench:"$PARTITIONS"
"$lstream" produce --brokers "$bootstrap" --topic bench --series "$SERIES" --features 4 \
  --records-per-series "$RECORDS" --generator sine --seed 1 >/dev/null 2>&1
"$lstream" bench engine --no-sgemm --steps 5 --shape 256,8,128,2,32

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}'; }
read -r -a setups <<<"${SETUPS:-none next next,eval next,eval+file}"
n=0
# The CPU seconds a process has used so far (user + system).
cpu_of() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"; }
# one_run REPLAY SETUP: prints the run's windows/s, then the CPU seconds per
# 1000 windows of the trainer and of the broker (which takes the forecasts).
one_run() {
  local extra=()
  [ "$1" = default ] || extra+=(--replay "$1")
  n=$((n + 1))
  case "$2" in
  none) ;;
  next) extra+=(--predictions-topic "p$n") ;;
  next,eval) extra+=(--predictions-topic "p$n" --predictions next,eval) ;;
  next,eval+file) extra+=(--predictions-topic "p$n" --predictions next,eval --predictions-out
    "$work/p.csv") ;;
  h12) extra+=(--predictions-topic "p$n" --horizon 12) ;;
  h12q) extra+=(--predictions-topic "p$n" --horizon 12 --quantiles 0.1,0.5,0.9) ;;
  *) echo "unknown set-up $2 in SETUPS" >&2; exit 2 ;;
  esac
  local b0 b1
  b0=$(cpu_of "$broker_pid")
  /usr/bin/time -f "%U %S" -o "$work/time" "$lstream" train --brokers "$bootstrap" --topic bench \
    --features 4 --window 32 --batch 256 --hidden 128 --layers 2 --until end --quiet \
    "${extra[@]}" >"$work/out"
  b1=$(cpu_of "$broker_pid")
  grep -E '^(summary|predictions)' "$work/out" | sed "s/^/replay=$1 $2: /" >&2
  local w
  w=$(sed -n 's/^summary.* windows=\([0-9]*\) .*/\1/p' "$work/out")
  echo "$(sed -n 's/^summary.* windows_per_s=\([0-9.]*\).*/\1/p' "$work/out")" \
    "$(awk -v w="$w" '{print ($1 + $2) * 1000 / w}' "$work/time")" \
    "$(awk -v a="$b0" -v b="$b1" -v w="$w" 'BEGIN {print (b - a) * 1000 / w}')"
}
replays=(default)
[ "$REPLAY0" = 1 ] && replays+=(0)
for replay in "${replays[@]}"; do
  : >"$work/rounds"
  for round in $(seq "$ROUNDS"); do
    line=""
    for s in "${setups[@]}"; do
      line="$line $(one_run "$replay" "$s")"
    done
    echo "$line" >>"$work/rounds"
  done
  for i in "${!setups[@]}"; do
    w=$((3 * i + 1)) c=$((3 * i + 2)) b=$((3 * i + 3))
    med() { awk -v c="$1" '{print $c}' "$work/rounds" | median; }
    ratio() { awk -v c="$1" -v d="$2" '{print $c / $d}' "$work/rounds" | median; }
    printf "predict_cost replay=%s forecasts=%s windows_per_s=%.1f ratio=%.3f cpu_s_per_1000_windows=%.3f (ratio %.3f) broker_cpu_s_per_1000_windows=%.3f\n" \
      "$replay" "${setups[$i]}" "$(med $w)" "$(ratio $w 1)" "$(med $c)" "$(ratio $c 2)" "$(med $b)"
  done
done
