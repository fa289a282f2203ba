#!/usr/bin/env bash
# Compares lstream's ingest speed with kcat's plain consume of the same topic.
#
# Starts `lstream broker` (32 partitions a topic: the mock keeps only about
# 5 MiB of batches per partition, and 2M csv records of 4 features are about
# 100 MB, which lz4 barely shrinks; 16 partitions lose some), produces the same
# synthetic feed (F = 4) into one topic per format with lz4, checks that every
# partition's low watermark is 0 and that the watermarks add up to what was
# produced (nothing evicted), then times, REPEAT times per format:
#   kcat -C -b ADDR -t TOPIC -e -o beginning -q > /dev/null
#   lstream bench ingest --brokers ADDR --topic TOPIC --format FMT --window 32
# and prints the medians and the ratio lstream/kcat (records/s; > 1 means
# lstream is faster). Both read from the same single-threaded mock broker, so
# the broker bounds both: this compares clients, not Kafka deployments.
#
# With REAL_KAFKA=DIR the same runs on a real Apache Kafka broker instead
# (tests/kafka/kafka.sh start DIR: one KRaft node from .ci/install-kafka's
# jars, with the JVM's full JIT and KAFKA_HEAP, default 2g), stopped at the
# end; topics are created with its admin API. It keeps every record, so the
# topic may be as large as the disk allows.
#
# Usage: tests/bench/ingest_vs_kcat.sh [BUILD_DIR]     (default: build)
# Environment: SERIES (1000) x RECORDS_PER_SERIES (2000) records, FEATURES (4),
#              PARTITIONS (32), WINDOW (32), REPEAT (3), FORMATS ("f32 csv"),
#              REAL_KAFKA (unset: the embedded mock broker).
set -euo pipefail

build=${1:-build}
lstream=$build/lstream
series=${SERIES:-1000}
per_series=${RECORDS_PER_SERIES:-2000}
features=${FEATURES:-4}
partitions=${PARTITIONS:-32}
window=${WINDOW:-32}
repeat=${REPEAT:-3}
formats=${FORMATS:-f32 csv}
records=$((series * per_series))

[ -x "$lstream" ] || { echo "no lstream program at $lstream (build first, or pass BUILD_DIR)" >&2; exit 2; }
command -v kcat > /dev/null || { echo "kcat is not on PATH" >&2; exit 2; }

tmp=$(mktemp -d)
broker_pid=
kafka=$(cd "$(dirname "$0")/../kafka" && pwd)
cleanup() {
  [ -n "$broker_pid" ] && kill "$broker_pid" 2> /dev/null && wait "$broker_pid" 2> /dev/null
  [ -z "${REAL_KAFKA:-}" ] || "$kafka/kafka.sh" stop "$REAL_KAFKA" || true
  rm -rf "$tmp"
}
trap cleanup EXIT

if [ -n "${REAL_KAFKA:-}" ]; then
  export KAFKA_HOME=${KAFKA_HOME:-$("$(dirname "$0")/../../.ci/install-kafka" --print-home)}
  KAFKA_HEAP=${KAFKA_HEAP:-2g} KAFKA_JVM_OPTS="-XX:TieredStopAtLevel=4 ${KAFKA_JVM_OPTS:-}" \
    "$kafka/kafka.sh" start "$REAL_KAFKA" 1
  addr=$(cat "$REAL_KAFKA/bootstrap")
  for fmt in $formats; do /usr/bin/python3 "$kafka/admin.py" create "$addr" "bench_$fmt:$partitions"; done
  echo "Apache Kafka $(basename "$KAFKA_HOME"/lib/kafka_2.13-*.jar .jar) at $addr," \
    "$partitions partitions a topic, $records records of $features features"
else
  topics=()
  for fmt in $formats; do topics+=(--topic "bench_$fmt:$partitions"); done
  "$lstream" broker "${topics[@]}" --bootstrap-file "$tmp/bootstrap" > /dev/null 2> "$tmp/broker.log" &
  broker_pid=$!
  for _ in $(seq 300); do [ -s "$tmp/bootstrap" ] && break; sleep 0.1; done
  [ -s "$tmp/bootstrap" ] || { echo "lstream broker did not start:" >&2; cat "$tmp/broker.log" >&2; exit 1; }
  addr=$(cat "$tmp/bootstrap")
  echo "broker $addr, $partitions partitions a topic, $records records of $features features"
fi

# Sum of the offsets kcat -Q prints for every partition at a logical time
# (-2: beginning, -1: end); fails unless each partition answers.
offsets() { # TOPIC TIME
  local args=() p
  for ((p = 0; p < partitions; p++)); do args+=(-t "$1:$p:$2"); done
  kcat -Q -b "$addr" "${args[@]}" | awk -v n="$partitions" '
    / offset / { s += $NF; c++ } END { if (c != n) exit 1; print s }'
}

now() { date +%s.%N; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

have_bench_ingest=1
"$lstream" bench ingest --help > /dev/null 2>&1 || have_bench_ingest=0

for fmt in $formats; do
  topic=bench_$fmt
  "$lstream" produce --brokers "$addr" --topic "$topic" --format "$fmt" --series "$series" \
    --records-per-series "$per_series" --features "$features" | tee "$tmp/produce.txt"
  low=$(offsets "$topic" -2)
  high=$(offsets "$topic" -1)
  if [ "$low" != 0 ] || [ "$high" != "$records" ]; then
    echo "$topic: low watermarks sum to $low, high to $high: the mock evicted records" \
      "(use more PARTITIONS or fewer records)" >&2
    exit 1
  fi
  echo "$topic: watermarks OK (low 0, high $records in total)"
  if [ -n "${REAL_KAFKA:-}" ]; then
    echo "$topic: $(du -cm "$REAL_KAFKA"/node-1/data/"$topic"-* | tail -n 1 | cut -f1) MiB on the broker's disk"
  fi

  : > "$tmp/kcat.txt"
  : > "$tmp/lstream.txt"
  for ((r = 1; r <= repeat; r++)); do
    t0=$(now)
    kcat -C -b "$addr" -t "$topic" -e -o beginning -q > /dev/null
    t1=$(now)
    awk -v n="$records" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f\n", n / (b - a) }' >> "$tmp/kcat.txt"
    if [ "$have_bench_ingest" = 1 ]; then
      line=$("$lstream" bench ingest --brokers "$addr" --topic "$topic" --format "$fmt" \
        --window "$window")
      echo "  $line"
      got=$(sed -n 's/.* records=\([0-9]*\) .*/\1/p' <<< "$line")
      [ "$got" = "$records" ] || { echo "lstream bench ingest read $got of $records records" >&2; exit 1; }
      sed -n 's/.*records_per_s=\([0-9.]*\).*/\1/p' <<< "$line" >> "$tmp/lstream.txt"
    fi
  done
  kcat_rps=$(median < "$tmp/kcat.txt")
  if [ "$have_bench_ingest" = 1 ]; then
    lstream_rps=$(median < "$tmp/lstream.txt")
    awk -v f="$fmt" -v k="$kcat_rps" -v l="$lstream_rps" -v n="$repeat" 'BEGIN {
      printf "ingest_vs_kcat format=%s repeat=%d kcat_records_per_s=%.0f lstream_records_per_s=%.0f ratio=%.2f\n", f, n, k, l, l / k }'
  else
    printf 'ingest_vs_kcat format=%s repeat=%d kcat_records_per_s=%.0f lstream_records_per_s=n/a (no `lstream bench ingest` in this build)\n' \
      "$fmt" "$repeat" "$kcat_rps"
  fi
done
