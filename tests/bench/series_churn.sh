#!/usr/bin/env bash
# Memory under key churn: KEYS distinct series pass through a replay whose
# series are bounded (--max-series BOUND), and the trainer's resident memory
# is sampled as it goes; beside it the same topic without a bound, which
# holds every series it ever saw.
#
# The topic (written once, by a real client: confluent-kafka, in
# PARTITIONS partitions): KEYS keys in waves of WAVE keys, each key's
# RECORDS records together (f32, one feature), event times increasing; so
# every wave's keys go quiet when the next begins. With --window 2 and 3
# records a key makes one window: the trainer's series table churns as much
# as the consumer's.
#
# Printed per run: a line every SAMPLE s (seconds, windows trained so far,
# resident MB), then the summary's series line, and the growth of the RSS
# between a quarter of the way and the end (flat: a bounded run).
#
# Usage: tests/bench/series_churn.sh [BUILD_DIR]
#   env: KEYS (2000000) WAVE (100000) RECORDS (3) BOUND (100000)
#        PARTITIONS (32) SAMPLE (2) UNBOUNDED_KEYS (KEYS / 2: the run
#        without a bound reads only that many keys' records, 0: skipped)
set -euo pipefail
build=${1:-build}
lstream=$(cd "$build" && pwd)/lstream
[ -x "$lstream" ] || { echo "no $lstream: build first" >&2; exit 1; }
KEYS=${KEYS:-2000000} WAVE=${WAVE:-100000} RECORDS=${RECORDS:-3} BOUND=${BOUND:-100000}
PARTITIONS=${PARTITIONS:-32} SAMPLE=${SAMPLE:-2}
UNBOUNDED_KEYS=${UNBOUNDED_KEYS:-$((KEYS / 2))}
. "$(dirname "$0")/lib.sh"

bench_broker --topic churn:"$PARTITIONS"

echo "writing $KEYS keys x $RECORDS records ($PARTITIONS partitions)"
/usr/bin/python3 - "$bootstrap" "$KEYS" "$WAVE" "$RECORDS" <<'PY'
import struct, sys, time
from confluent_kafka import Producer
bootstrap, keys, wave, records = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
p = Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4", "linger.ms": 50,
              "batch.num.messages": 10000, "queue.buffering.max.messages": 1000000,
              "partitioner": "murmur2_random"})
t0, start = 1700000000000, time.time()
for k in range(keys):
    key = b"K%07d" % k
    for i in range(records):
        while True:
            try:
                p.produce("churn", key=key, value=struct.pack("<f", (k % 97 + i) / 97.0),
                          timestamp=t0 + (k // wave) * 1000000 + (k % wave) * records + i)
                break
            except BufferError:
                p.poll(0.1)
    if k % 10000 == 0:
        p.poll(0)
assert p.flush(120) == 0
print("written in %.1f s" % (time.time() - start))
PY
/usr/bin/python3 - "$bootstrap" "$PARTITIONS" <<'PY'
import sys
from confluent_kafka import Consumer, TopicPartition
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "churn-check"})
low = [c.get_watermark_offsets(TopicPartition("churn", p), timeout=10)[0]
       for p in range(int(sys.argv[2]))]
assert not any(low), "the mock dropped records (low watermarks %s): use more partitions" % low
PY

# run NAME ARGS...: a replay sampled every SAMPLE s.
run() {
  local name=$1
  shift
  rm -f "$work/m"
  "$lstream" train --brokers "$bootstrap" --topic churn --until end --features 1 --window 2 \
    --batch 256 --hidden 8 --log-every 1000000 --metrics "$work/m" "$@" >"$work/out" \
    2>"$work/err" &
  trainer_pid=$!
  local t0 samples=()
  t0=$(date +%s.%N)
  echo "== $name: seconds windows rss_mb"
  while kill -0 "$trainer_pid" 2>/dev/null; do
    local rss windows now
    rss=$(awk '/^VmRSS/ {print $2}' "/proc/$trainer_pid/status" 2>/dev/null || echo 0)
    windows=$(awk -F'"windows":' '{split($2, a, ","); n += a[1]} END {print n + 0}' \
      "$work/m" 2>/dev/null || echo 0)
    now=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.0f", b - a}')
    [ -n "$rss" ] && [ "$rss" -gt 0 ] && {
      printf '%6s %10s %8.1f\n' "$now" "$windows" "$(echo "$rss / 1024" | bc -l)"
      samples+=("$windows:$rss")
    }
    sleep "$SAMPLE"
  done
  wait "$trainer_pid" || { echo "$name: train failed: $(tail -3 "$work/err")" >&2; exit 1; }
  trainer_pid=
  grep -E '^(summary|series)' "$work/out"
  # The RSS at about a quarter of the windows, and the last sample.
  local total=${samples[-1]%%:*} quarter=0 last=${samples[-1]##*:}
  for s in "${samples[@]}"; do
    [ "${s%%:*}" -ge $((total / 4)) ] && { quarter=${s##*:}; break; }
  done
  awk -v a="$quarter" -v b="$last" -v n="$name" \
    'BEGIN {printf "%s: RSS %.1f MB at a quarter, %.1f MB at the end (x%.2f)\n", n, a / 1024, b / 1024, b / a}'
}

run "bounded (--max-series $BOUND)" --max-series "$BOUND"
if [ "$UNBOUNDED_KEYS" -gt 0 ]; then
  # Without a bound the first UNBOUNDED_KEYS keys' records: up to the offset
  # each partition holds them to, read as a replay to --max-steps.
  run "unbounded, stopped at $UNBOUNDED_KEYS keys" \
    --max-steps $((UNBOUNDED_KEYS / 256))
fi
