#!/usr/bin/env bash
# Records as feeds send them (issue 26), end to end on the embedded broker,
# written by outside clients (confluent-kafka; fastavro from PyPI, installed
# into VENV when missing: no network, no test):
#   same       the same ticks as JSON (null Kafka keys, Kafka timestamps far
#              off and backwards: key and time from the payload), as Avro
#              plain and in Confluent's framing, and as CSV: bit-identical
#              digests, and the final fifth of event time from the payload;
#              JSON forecasts on the predictions topic
#   malformed  JSON with a tick missing px, one with qty a string and one
#              truncated per partition: counted by reason, never trained,
#              each in the dead-letter topic with its reason, partition and
#              offset in headers (read by confluent-kafka)
#   garbage    CSV text read as f32 stops at once, naming CSV text; a missing
#              topic fails naming the topics that exist (and is not
#              created); a replay that rejected every record exits non-zero
#   lag        live, a producer writing: /metrics' per-partition lag is never
#              negative; per-target figures labelled by the fields' names
# Usage: formats_test.sh LSTREAM CASE VENV
set -euo pipefail
lstream=$1
case_=$2
venv=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

if ! "$venv/bin/python" -c 'import fastavro, confluent_kafka, numpy' 2>/dev/null; then
  /usr/bin/python3 -m venv --system-site-packages "$venv" || fail "cannot create the venv $venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check fastavro ||
    fail "cannot install fastavro from PyPI into $venv (no network?)"
fi
py=$venv/bin/python
feed() { "$py" "$here/formats_feed.py" "$bootstrap" "$@" || fail "formats_feed.py $*"; }
small=(--until end --quiet --window 8 --batch 8 --hidden 16)
json=(--format json --fields px,qty --key-field sym --time-field ts)

case $case_ in
same)
  start_broker --topic json:4 --topic csv:4 --topic avro:4 --topic avrocf:4 --topic out:2
  feed json json 8 300 --bad-kafka-time
  feed csv csv 8 300
  feed avro avro 8 300
  feed avrocf avro-cf 8 300 --schema-id 7
  "$py" "$here/formats_feed.py" - - schema 0 0 >"$work/tick.avsc"
  avro=(--format avro --avro-schema "$work/tick.avsc" --fields px,qty --key-field sym --time-field ts)
  run csv "$lstream" train --brokers "$bootstrap" --topic csv "${small[@]}" --format csv --features 2
  run json "$lstream" train --brokers "$bootstrap" --topic json "${small[@]}" "${json[@]}"
  # (Forecasts going out keep their bookkeeping in the series' states: a
  # run of their own.)
  run forecasts "$lstream" train --brokers "$bootstrap" --topic json "${small[@]}" "${json[@]}" \
    --predictions-topic out
  run avro "$lstream" train --brokers "$bootstrap" --topic avro "${small[@]}" "${avro[@]}"
  run avrocf "$lstream" train --brokers "$bootstrap" --topic avrocf "${small[@]}" "${avro[@]}" \
    --avro-schema-id 7
  want=$(grep '^digest' "$work/csv.out")
  [ -n "$want" ] || fail "no digest from the csv run"
  for f in json avro avrocf; do
    got=$(grep '^digest' "$work/$f.out")
    [ "$got" = "$want" ] || fail "$f: '$got', csv: '$want'"
    [ "$(field "$work/$f.out" summary records)" = 2392 ] || fail "$f trained $(field "$work/$f.out" summary records) records"
    [ "$(field "$work/$f.out" rejected read)" = 2400 ] || fail "$f read $(field "$work/$f.out" rejected read)"
  done
  # The final fifth from the payload's times (the Kafka timestamps of json
  # lie a billion ms before them).
  for f in json avro; do
    [ "$(field "$work/$f.out" loss final_from_ms)" = "$(field "$work/csv.out" loss final_from_ms)" ] ||
      fail "$f: the final fifth from $(field "$work/$f.out" loss final_from_ms), not the payload's"
  done
  grep -q '^target feature=0 name=px ' "$work/json.out" || fail "no name=px in the json summary"
  # Forecasts as JSON objects, the fields named as given.
  "$py" - "$bootstrap" <<'PY' || fail "the forecasts are not JSON objects as documented"
import json, sys
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "check", "auto.offset.reset": "earliest",
              "isolation.level": "read_committed"})
c.subscribe(["out"])
n = 0
while n < 2400:
    m = c.poll(10)
    if m is None:
        break
    if m.error():
        continue
    o = json.loads(m.value())
    assert set(o) == {"key", "partition", "offset", "time", "kind", "step", "forecast"}, o
    assert set(o["forecast"]) == {"px", "qty"} and o["key"] == m.key().decode(), o
    assert o["time"] >= 1704205800000 and o["kind"] == "next", o
    n += 1
assert n == 2400, n
print(f"formats: {n} forecasts as JSON objects")
PY
  echo "PASS: json, avro (plain, Confluent) and csv give $want"
  ;;
malformed)
  start_broker --topic json:4 --topic dlq:1
  feed json json 8 300 --malformed --bad-kafka-time
  run json "$lstream" train --brokers "$bootstrap" --topic json "${small[@]}" "${json[@]}" \
    --dead-letter-topic dlq
  for r in field type parse; do
    [ "$(field "$work/json.out" rejected "$r")" = 4 ] || fail "rejected $r=$(field "$work/json.out" rejected "$r"), not 4"
  done
  [ "$(field "$work/json.out" summary records)" = 2392 ] || fail "a malformed tick trained"
  [ "$(field "$work/json.out" rejected dead_letters)" = 12 ] || fail "dead_letters=$(field "$work/json.out" rejected dead_letters)"
  "$py" - "$bootstrap" <<'PY' || fail "the dead letters are not as documented"
import sys
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "check", "auto.offset.reset": "earliest"})
c.subscribe(["dlq"])
seen = {}
while len(seen) < 12:
    m = c.poll(10)
    if m is None:
        break
    h = {k: v.decode() for k, v in m.headers()}
    # Each partition's 2 series' ticks 0..200, then the 3 bad ones (offsets 401-403).
    seen[(int(h["lstream-partition"]), int(h["lstream-offset"]))] = h["lstream-reject-reason"]
want = {(p, 401 + i): r for p in range(4) for i, r in enumerate(["field", "type", "parse"])}
assert seen == want, (seen, want)
print("formats: 12 dead letters with their reason, partition and offset")
PY
  echo "PASS: malformed ticks counted, never trained, dead-lettered"
  ;;
garbage)
  start_broker --topic csv:2 --topic json:2
  feed csv csv 4 300
  feed json json 4 300
  rc=0
  "$lstream" train --brokers "$bootstrap" --topic csv "${small[@]}" >"$work/f32.out" 2>"$work/f32.err" || rc=$?
  [ $rc != 0 ] || fail "csv read as f32 exited 0"
  grep -q 'look like CSV text of 2 numbers.*--format csv --features 2' "$work/f32.err" ||
    { cat "$work/f32.err" >&2; fail "the error does not name CSV text"; }
  grep -q '^summary' "$work/f32.out" && fail "csv read as f32 trained steps"
  rc=0
  "$lstream" train --brokers "$bootstrap" --topic jsno "${small[@]}" >/dev/null 2>"$work/missing.err" || rc=$?
  [ $rc != 0 ] || fail "a missing topic exited 0"
  grep -q "the topic 'jsno' does not exist; the cluster's topics: .*'json'" "$work/missing.err" ||
    { cat "$work/missing.err" >&2; fail "the error does not name the topics"; }
  rc=0
  "$lstream" train --brokers "$bootstrap" --topic jsno "${small[@]}" >/dev/null 2>&1 || rc=$?
  grep -q "'jsno' does not exist" "$work/missing.err" && [ $rc != 0 ] || fail "the missing topic was created"
  # JSON without --key-field: every record lacks a key (and its first
  # records all decode, so only the end says so).
  rc=0
  "$lstream" train --brokers "$bootstrap" --topic json "${small[@]}" --format json --fields px,qty \
    >"$work/nokey.out" 2>"$work/nokey.err" || rc=$?
  [ $rc != 0 ] || fail "a replay that rejected every record exited 0"
  grep -q 'every one of the 1200 records read was rejected' "$work/nokey.err" ||
    { cat "$work/nokey.err" >&2; fail "no message for a replay that rejected every record"; }
  echo "PASS: garbage stops the run"
  ;;
lag)
  start_broker --topic json:2
  feed json json 4 50
  # The log exists before the loop below reads it (the background job's
  # redirection may come later: sed on a missing file ends this script).
  : >"$work/live.err"
  "$lstream" train --brokers "$bootstrap" --topic json --window 8 --batch 4 --hidden 8 \
    "${json[@]}" --http 127.0.0.1:0 --deadline-ms 50 >"$work/live.out" 2>>"$work/live.err" &
  pid=$!
  for _ in $(seq 200); do
    port=$(sed -n 's/.*serves http:\/\/127.0.0.1:\([0-9]*\)\/metrics.*/\1/p' "$work/live.err" | head -n 1)
    [ -n "$port" ] && break
    sleep 0.05
  done
  [ -n "${port:-}" ] || { cat "$work/live.err" >&2; fail "no --http port"; }
  # A producer writing while the scrapes run.
  ( for i in 1 2 3 4 5 6; do
    "$py" "$here/formats_feed.py" "$bootstrap" json json 4 40 --first $((10 + 40 * i)) >/dev/null 2>&1
  done ) &
  writer=$!
  scrapes=0 lags=0 named=0
  while kill -0 $writer 2>/dev/null || [ $scrapes -lt 20 ]; do
    curl -sf "http://127.0.0.1:$port/metrics" >"$work/m" || break
    scrapes=$((scrapes + 1))
    grep -q '^lstream_consumer_lag_records{.*} -' "$work/m" && { cat "$work/m" >&2; fail "a negative lag"; }
    lags=$((lags + $(grep -c '^lstream_consumer_lag_records{' "$work/m" || true)))
    grep -q '^lstream_target_loss{rank="0",target="qty"}' "$work/m" && named=1
    sleep 0.1
  done
  wait $writer || true
  kill -TERM $pid && wait $pid || true
  [ $lags -gt 0 ] || fail "no lag samples in $scrapes scrapes"
  [ $named = 1 ] || fail "no per-target figure labelled by its field's name (target=\"qty\")"
  echo "PASS: $lags lag samples in $scrapes scrapes, none negative"
  ;;
*)
  fail "unknown case $case_"
  ;;
esac
