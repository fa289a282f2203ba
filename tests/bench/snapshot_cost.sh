#!/usr/bin/env bash
# What snapshots cost the step loop: the same training with no snapshots and
# with `--snapshot-every EVERY` (the other snapshot options at their
# defaults), side by side, in a replay and live, ROUNDS rounds (the two
# set-ups alternate, their order turning each round: the machine may be
# shared, so compare within a round).
#
#   replay  a topic of SERIES series x RECORDS records of F features on 16
#           partitions (lz4), replayed with `train --until end` (STEPS > 0:
#           --max-steps STEPS) at the default shape and options: the
#           look-ahead (--queue-windows, 4096 windows a partition) holds most
#           of the topic at first, all of it records in flight that a
#           snapshot keeps. The step time: the run's wall seconds from the
#           end of its first step (which waits for the look-ahead to fill)
#           to the end of its last, over its steps (from --metrics).
#   live    `train` without --until reads the same topic from its start, as
#           a trainer catching up on a backlog: always a step to take (the
#           wait share printed says how nearly), steps formed as live ones
#           are, its queues full; stopped after DURATION s. (A feed written
#           beside it would have to outrun the trainer on the same two
#           cores.) The step time: the wall seconds over the steps between
#           WARMUP s and DURATION s.
#
# So what a snapshot holds up on the trainer's thread (filling it, the
# consumer held meanwhile) and what its writer thread takes from the engine's
# cores both count. Beside it, the process's CPU time over the same steps
# (every thread: the consumer's, the engine's, the writer's), which other
# jobs on a shared machine move less. Prints per round and mode the step
# times, their share (with / without - 1), the CPU times and theirs, the
# snapshots committed and skipped (a writer still busy when the next one is
# due skips it: fewer snapshots than asked hide cost); then per mode the
# medians over rounds. With BASELINE=PATH (another lstream binary, e.g. the
# branch's base) each round runs both set-ups with it too, and its figures
# are printed beside this build's.
#
# Usage: tests/bench/snapshot_cost.sh [BUILD_DIR]
#   env: ROUNDS (3) EVERY (10) SERIES (512) RECORDS (4097) F (4) STEPS (0: the
#        whole topic) DURATION (20 s) WARMUP (5 s)
#        MODES ("replay live") BASELINE (none) SNAP_ARGS (more options for the runs
#        with snapshots, e.g. "--snapshot-level -50")
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_bins "${1:-}"
ROUNDS=${ROUNDS:-3} EVERY=${EVERY:-10} SERIES=${SERIES:-512} RECORDS=${RECORDS:-4097} F=${F:-4}
STEPS=${STEPS:-0} DURATION=${DURATION:-20} WARMUP=${WARMUP:-5}
MODES=${MODES:-replay live}
bench_broker --topic bench:16
"$lstream" produce --brokers "$bootstrap" --topic bench --series "$SERIES" --features "$F" \
  --records-per-series "$RECORDS" --generator sine --seed 1 >/dev/null 2>&1


# figures METRICS CPU FROM TO: "step_ms cpu_ms wait_share windows_per_step"
# over the steps that ended in [FROM, TO] s of the run (the first step left
# out: its end starts the clock); CPU holds "user system" seconds at FROM
# and at TO (one pair: the whole run's, FROM 0).
figures() {
  /usr/bin/python3 - "$@" <<'PY'
import json, sys
steps = [json.loads(l) for l in open(sys.argv[1])]
cpu = [float(v) for v in open(sys.argv[2]).read().split()]
lo, hi = float(sys.argv[3]), float(sys.argv[4])
s = [x for x in steps[1:] if lo <= x["time_s"] <= hi]
wall = s[-1]["time_s"] - s[0]["time_s"]
used = cpu[0] + cpu[1] if len(cpu) == 2 else cpu[2] + cpu[3] - cpu[0] - cpu[1]
print("%.3f %.3f %.3f %.1f" % (1000 * wall / (len(s) - 1), 1000 * used / len(s),
                               sum(x["wait_s"] for x in s[1:]) / wall,
                               sum(x["windows"] for x in s) / len(s)))
PY
}

# snaps OUT: "committed/skipped" of a run's summary.
snaps() { sed -n 's/^snapshots committed=\([0-9]*\) skipped=\([0-9]*\).*/\1\/\2/p' "$1"; }

# run N BIN MODE SNAP: run number N (its files) (SNAP = 1: with snapshots);
# prints "step_ms cpu_ms wait_share windows_per_step committed/skipped".
run() {
  local n=$1 bin=$2 mode=$3 snap=$4 extra=()
  rm -rf "$work/snaps"
  [ "$snap" = 0 ] ||
    extra+=(--snapshot-dir "$work/snaps" --snapshot-every "$EVERY" --resume none ${SNAP_ARGS:-})
  if [ "$mode" = replay ]; then
    /usr/bin/time -f '%U %S' -o "$work/cpu.$n" "$bin" train --brokers "$bootstrap" \
      --topic bench --features "$F" --until end --max-steps "$STEPS" --metrics "$work/m.$n" \
      --quiet "${extra[@]}" >"$work/out.$n"
    echo "$(figures "$work/m.$n" "$work/cpu.$n" 0 1e9) $(snaps "$work/out.$n")"
    return
  fi
  "$bin" train --brokers "$bootstrap" --topic bench --features "$F" --metrics "$work/m.$n" \
    --quiet "${extra[@]}" >"$work/out.$n" 2>"$work/err.$n" &
  trainer_pid=$!
  # Its CPU time (user and system seconds) at WARMUP s and at DURATION s.
  cpu_of() { awk -v hz="$(getconf CLK_TCK)" '{print $14 / hz, $15 / hz}' "/proc/$trainer_pid/stat"; }
  sleep "$WARMUP"
  cpu_of >"$work/cpu.$n"
  sleep $((DURATION - WARMUP))
  cpu_of >>"$work/cpu.$n"
  kill -TERM $trainer_pid && wait $trainer_pid || true
  trainer_pid=
  echo "$(figures "$work/m.$n" "$work/cpu.$n" "$WARMUP" "$DURATION") $(snaps "$work/out.$n")"
}

# share A B: (B / A - 1) in percent.
share() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", (b / a - 1) * 100}'; }
n=0
for mode in $MODES; do
  for b in "${!bins[@]}"; do eval "st0_$b=() st1_$b=() ss_$b=() cpu0_$b=() cpu1_$b=() cs_$b=()"; done
  for r in $(seq "$ROUNDS"); do
    for b in "${!bins[@]}"; do
      bin=${bins[$b]}
      n=$((n + 2))
      if [ $(((r + b) % 2)) -eq 1 ]; then
        x=($(run $((n - 1)) "$bin" "$mode" 0)) y=($(run $n "$bin" "$mode" 1))
      else
        y=($(run $((n - 1)) "$bin" "$mode" 1)) x=($(run $n "$bin" "$mode" 0))
      fi
      s=$(share "${x[0]}" "${y[0]}") c=$(share "${x[1]}" "${y[1]}")
      eval "st0_$b+=(${x[0]}) st1_$b+=(${y[0]}) ss_$b+=($s) cpu0_$b+=(${x[1]}) cpu1_$b+=(${y[1]}) cs_$b+=($c)"
      echo "round $r mode=$mode bin=$bin step_ms none=${x[0]} every_$EVERY=${y[0]} share=$s%" \
        "cpu_ms_per_step none=${x[1]} every_$EVERY=${y[1]} share=$c% wait_share" \
        "none=${x[2]} every_$EVERY=${y[2]} windows_per_step none=${x[3]} every_$EVERY=${y[3]}" \
        "snapshots_committed/skipped=${y[4]}"
    done
  done
  for b in "${!bins[@]}"; do
    m=()
    for v in st0 st1 ss cpu0 cpu1 cs; do eval 'm+=("$(bench_median "${'$v'_'$b'[@]}")")'; done
    printf "snapshot_cost mode=%s bin=%s rounds=%d every=%d median_step_ms none=%.3f every_%d=%.3f share=%.2f%% median_cpu_ms_per_step none=%.3f every_%d=%.3f share=%.2f%%\n" \
      "$mode" "${bins[$b]}" "$ROUNDS" "$EVERY" "${m[0]}" "$EVERY" "${m[1]}" "${m[2]}" "${m[3]}" \
      "$EVERY" "${m[4]}" "${m[5]}"
  done
done
