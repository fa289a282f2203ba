#!/usr/bin/env bash
# Live mode: how far training runs behind the data, and how fast a backlog
# drains, on the embedded broker.
#
#   latency  a real client (confluent-kafka, tests/bench/live_producer.py)
#            writes SERIES series at RATE records/s in all for DURATION s,
#            each record stamped with the time it is sent; `lstream train`
#            (live, default options but --window, --batch, --hidden) logs
#            every step's lag_ms (--metrics: from the event time of each
#            window's last target to its step's end, the mean over the
#            step's windows). Printed: the p50 and p99 over windows (each
#            window given its step's mean), the first WARMUP seconds left
#            out, and the last quarter's p50 (a lag that grows shows there).
#            Run at 4 series and at 1000.
#   drain    a backlog of 4 series x 250 windows written first; the live
#            trainer started on it, the time from its start to the step
#            that trained the last of them (metrics time_s), beside a
#            replay of the same topic (--until end, summary seconds).
#
# With BASELINE=PATH (another lstream binary, e.g. main's, that logs no
# lag_ms) the drain is also taken with it, alternating, side by side.
#
# Usage: tests/bench/live_latency.sh [BUILD_DIR]
#   env: T (32) B (64) H (32) DURATION (30 s) WARMUP (10 s) RATE4 (200: 4 series x
#        50/s) RATE1000 (4000: 1000 series x 4/s) BACKLOG (250 windows a
#        series) BASELINE (none) ROUNDS (1) TRAIN_ARGS (more options for the
#        latency runs, e.g. "-X fetch.wait.max.ms=500")
set -euo pipefail
build=${1:-build}
lstream=$(cd "$build" && pwd)/lstream
[ -x "$lstream" ] || { echo "no $lstream: build first" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
T=${T:-32} B=${B:-64} H=${H:-32} DURATION=${DURATION:-30} WARMUP=${WARMUP:-10}
RATE4=${RATE4:-200} RATE1000=${RATE1000:-4000} BACKLOG=${BACKLOG:-250} ROUNDS=${ROUNDS:-1}
bins=("$lstream")
[ -z "${BASELINE:-}" ] || bins+=("$(cd "$(dirname "$BASELINE")" && pwd)/$(basename "$BASELINE")")
. "$(dirname "$0")/lib.sh"
bench_broker
topic_n=0

# windows METRICS: windows trained so far.
windows() {
  [ -f "$1" ] || { echo 0 && return; }
  awk -F'"windows":' '{split($2, a, ","); n += a[1]} END {print n + 0}' "$1"
}

# latency BIN SERIES RATE: one live run; prints its line.
latency() {
  local bin=$1 series=$2 rate=$3 topic=lat$((topic_n += 1)) m="$work/m.$topic_n"
  "$bin" train --brokers "$bootstrap" --topic "$topic" --window "$T" --batch "$B" --hidden "$H" \
    --metrics "$m" --quiet ${TRAIN_ARGS:-} >/dev/null 2>"$work/err" &
  trainer_pid=$!
  /usr/bin/python3 "$here/live_producer.py" "$bootstrap" "$topic" "$series" "$rate" "$DURATION"
  sleep 1 # the last windows' steps
  kill -TERM $trainer_pid && wait $trainer_pid || true
  trainer_pid=
  /usr/bin/python3 - "$m" "$WARMUP" "$bin" "$series" "$rate" <<'PY'
import json, sys
steps = [json.loads(l) for l in open(sys.argv[1])]
warm = float(sys.argv[2])
lags = sorted((s["lag_ms"], s["windows"]) for s in steps
              if s["time_s"] >= warm and s["lag_ms"] is not None)
def pct(pairs, q):
    total = sum(w for _, w in pairs)
    acc = 0
    for lag, w in pairs:
        acc += w
        if acc >= q * total:
            return lag
    return float("nan")
tail = [s for s in steps if s["time_s"] >= warm]
last = sorted((s["lag_ms"], s["windows"]) for s in tail[len(tail) * 3 // 4:] if s["lag_ms"] is not None)
print("latency bin=%s series=%s rate=%s windows=%d steps=%d p50_ms=%.1f p99_ms=%.1f "
      "last_quarter_p50_ms=%.1f" % (sys.argv[3], sys.argv[4], sys.argv[5],
      sum(w for _, w in lags), len(lags), pct(lags, 0.5), pct(lags, 0.99), pct(last, 0.5)))
PY
}

# drain BIN: the backlog, live then replayed; prints its line.
drain() {
  local bin=$1 topic=drain$((topic_n += 1)) m="$work/m.$topic_n" want=$((4 * BACKLOG))
  "$lstream" produce --brokers "$bootstrap" --topic "$topic" --series 4 --features 1 \
    --records-per-series $((BACKLOG * T + 1)) --generator sine --seed 3 >/dev/null 2>&1
  "$bin" train --brokers "$bootstrap" --topic "$topic" --window "$T" --batch "$B" --hidden "$H" \
    --metrics "$m" --quiet >/dev/null 2>"$work/err" &
  trainer_pid=$!
  local waited=0
  while [ "$(windows "$m")" -lt $want ] && [ $waited -lt 1200 ]; do sleep 0.1; waited=$((waited + 1)); done
  kill -TERM $trainer_pid && wait $trainer_pid || true
  trainer_pid=
  local live replay
  live=$(awk -F'"windows":' -v want=$want '{split($2, a, ","); n += a[1]}
    n >= want {sub(/.*"time_s":/, ""); sub(/,.*/, ""); print; exit}' "$m")
  replay=$("$bin" train --brokers "$bootstrap" --topic "$topic" --window "$T" --batch "$B" \
    --hidden "$H" --until end --quiet | sed -n 's/^summary.* seconds=\([0-9.]*\).*/\1/p')
  echo "drain bin=$bin windows=$want live_s=${live:-over_120} replay_s=$replay"
}

for ((r = 0; r < ROUNDS; r++)); do
  latency "$lstream" 4 "$RATE4"
  latency "$lstream" 1000 "$RATE1000"
  for bin in "${bins[@]}"; do drain "$bin"; done
done
