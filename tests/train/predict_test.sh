#!/usr/bin/env bash
# Forecasts going out (issue 12), end to end on the embedded broker; the
# predictions topic read by confluent-kafka with isolation.level=
# read_committed (predictions_check.py), the file by Python's csv.
#
# Usage: predict_test.sh LSTREAM CASE
#   replay    a replay with --predictions next,eval to a topic and a file:
#             a next forecast after every record, an eval one per trained
#             target, each once, headers naming its record; the file holds
#             the same with the actual values; its eval rows reproduce the
#             reported MSE to 1e-6
#   kill      the replay killed (SIGKILL) at several points, one during a
#             snapshot write, and resumed: each forecast once in the
#             topic, bit-identical to an uninterrupted run's; the file
#             byte-identical
#   live      live, a producer writing, the trainer killed 3 times and
#             resumed: a next forecast after every record, each once
#   term      live, a producer writing, the trainer stopped with SIGTERM 3
#             times while forecasts go out (a rolling restart), then once
#             the feed is done: each run exits 0 with a final snapshot of
#             its last step, the next resumes from that step (redoing none),
#             and every record's next forecast is in the topic once; with
#             steps that take a while (hidden 128), some forecasts made
#             while a step ran (the serving thread)
#   mpi       mpirun -np 2, csv records, one target feature: each rank
#             publishes its own series' forecasts (as csv), each once, every
#             record's
#   outage    live, the broker taken down and brought back while forecasts
#             go out: none lost, none twice
#   bad_topic a predictions topic that cannot be written fails at start, and
#             so does the source topic itself (a feedback loop)
#   kill_h3   kill with --horizon 3 (issue 25): each message holds the 3
#             horizons' forecasts (header lstream-horizon), each once; the
#             file a row per (series, offset, h) with the actual of the
#             record h ahead where known
#   kill_q, live_q
#             kill and live with --horizon 3 --quantiles 0.1,0.5,0.9: the
#             quantiles too (header lstream-quantiles), never crossing in the
#             file
#   run_id    two trainers with one snapshot directory path (deleted between
#             them) are two lineages: the second publishes every forecast
#   evict     a replay with --max-series 60 over 300 keys in 3 waves (the
#             series table's slots move as series are evicted): every
#             target's eval forecast and next forecasts of every record
#             but the evicted series' last, each once, each bit for bit
#             the forecast of a run without the bound
set -euo pipefail
lstream=$1
case_name=$2
stopper=${3:-} # stop_at.so, for kill_at (lib.sh)
source "$(dirname "$0")/lib.sh"
mpi_env
check="/usr/bin/python3 $(dirname "$0")/predictions_check.py"

source "$(dirname "$0")/forecasts_lib.sh"

# CASE_h3: CASE with --horizon 3, CASE_q with --horizon 3 --quantiles
# 0.1,0.5,0.9, checked as such.
case "$case_name" in
*_h3)
  case_name=${case_name%_h3}
  args+=(--horizon 3)
  check="$check --horizon 3"
  ;;
*_q)
  case_name=${case_name%_q}
  args+=(--horizon 3 --quantiles 0.1,0.5,0.9)
  check="$check --horizon 3 --quantiles 0.1,0.5,0.9"
  ;;
esac

# Waits (up to 120 s) until topic $1 holds at least $2 forecasts of kind next.
wait_forecasts() {
  /usr/bin/python3 - "$bootstrap" "$1" "$2" <<'EOF'
import sys, time
from confluent_kafka import Consumer, TopicPartition
brokers, topic, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = Consumer({'bootstrap.servers': brokers, 'group.id': 'wait', 'isolation.level': 'read_committed'})
end = time.time() + 120
while time.time() < end:
    md = c.list_topics(topic, timeout=10)
    n = sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in md.topics[topic].partitions)
    if n >= want:
        sys.exit(0)
    time.sleep(0.2)
sys.exit(f'FAIL: {topic} holds {n} messages after 120 s, {want} expected')
EOF
}

# live_trainer NAME N: a live trainer publishing to topic preds, a snapshot
# into $dir every N steps, in the background ($pid); its output in
# $work/NAME.out and .err, its steps in $work/metrics.
live_trainer() {
  rm -f "$work/metrics"
  "$lstream" "${args[@]}" --deadline-ms 50 --predictions-topic preds --snapshot-dir "$dir" \
    --snapshot-every "$2" --metrics "$work/metrics" >"$work/$1.out" 2>"$work/$1.err" &
  pid=$!
}

case "$case_name" in
evict)
  start --topic ev:2 --topic preds:2 --topic ref:2
  t0=1700000000000
  for w in 0 1 2; do
    for k in $(seq 0 99); do
      for i in $(seq 0 8); do
        echo "W${w}K$k,$((t0 + w * 100000 + k * 10 + i)),$((k + i)).5"
      done
    done
  done >"$work/ev.csv"
  "$lstream" produce --brokers "$bootstrap" --topic ev --csv "$work/ev.csv" >/dev/null
  ev=(train --brokers "$bootstrap" --topic ev --features 1 --window 4 --batch 16 --hidden 4
    --threads 1 --quiet --until end --predictions next,eval)
  # Without a bound: the same model (an evicted series is done), every
  # forecast the bounded run makes.
  run ref "$lstream" "${ev[@]}" --predictions-topic ref
  run ev "$lstream" "${ev[@]}" --max-series 60 --predictions-topic preds
  grep -E '^(predictions|series)' "$work/ev.out"
  # 300 series x 8 targets; next: after each window input (8 a series)
  # and the last record of the 60 series held at the end.
  [ "$(field "$work/ev.out" series evicted_states)" = 240 ] || fail "not 240 series evicted"
  [ "$(field "$work/ev.out" predictions eval)" = 2400 ] || fail "not 2400 eval forecasts"
  [ "$(field "$work/ev.out" predictions next)" = 2460 ] || fail "not 2460 next forecasts"
  [ "$(field "$work/ev.out" predictions published)" = 4860 ] || fail "not 4860 published"
  $check "$bootstrap" ev preds --features 1 --within ref >"$work/check.out" ||
    fail "the predictions topic is wrong"
  cat "$work/check.out"
  grep -q '^predictions_check: 4860 forecasts' "$work/check.out" || fail "not 4860 in the topic"
  ;;
run_id)
  # Two trainers, one after the other, with one snapshot directory path (a
  # directory deleted to retrain, or two containers' /var/lib/lstream),
  # publishing to one topic: each is its own lineage (a random run id made
  # when its directory is first used, kept there): the second publishes
  # every forecast, none taken for the first's.
  start --topic preds:3
  produce --series 12 --records-per-series 120
  run first "$lstream" "${args[@]}" --until end --predictions-topic preds \
    --snapshot-dir "$work/lib"
  id1=$(cat "$work/lib/run-id")
  rm -rf "$work/lib"
  run second "$lstream" "${args[@]}" --until end --predictions-topic preds --seed 2 \
    --snapshot-dir "$work/lib"
  id2=$(cat "$work/lib/run-id")
  grep '^predictions' "$work/first.out" "$work/second.out"
  [ "$id1" != "$id2" ] || fail "both lineages have run id $id1"
  [ "$(field "$work/second.out" predictions published)" = 1440 ] ||
    fail "the second trainer published $(field "$work/second.out" predictions published) of 1440"
  [ "$(field "$work/second.out" predictions skipped)" = 0 ] ||
    fail "the second trainer skipped forecasts it took for the first's"
  # The same directory resumed keeps its id (and publishes nothing twice).
  run third "$lstream" "${args[@]}" --until end --predictions-topic preds --seed 2 \
    --snapshot-dir "$work/lib"
  [ "$(cat "$work/lib/run-id")" = "$id2" ] || fail "a resume changed the run id"
  grep -q 'resumed from' "$work/third.err" || fail "the third run did not resume"
  published=$(field "$work/third.out" predictions published) # no line: none made
  [ "${published:-0}" = 0 ] || fail "the resume published $published again"
  ;;
replay)
  start --topic preds:3
  produce --series 12 --records-per-series 120
  run plain "$lstream" "${args[@]}" --until end --predictions-topic preds --predictions next,eval \
    --predictions-out "$work/p.csv"
  grep '^predictions' "$work/plain.out"
  [ "$(field "$work/plain.out" predictions next)" = 1440 ] || fail "not 1440 next forecasts"
  [ "$(field "$work/plain.out" predictions eval)" = 1428 ] || fail "not 1428 eval forecasts"
  [ "$(field "$work/plain.out" predictions published)" = 2868 ] || fail "not 2868 published"
  $check "$bootstrap" src preds --features 2 --expect next,eval --file "$work/p.csv" \
    --summary "$work/plain.out" || fail "the predictions topic or file is wrong"
  ;;
kill)
  start --topic plain:3 --topic killed:3
  produce --series 16 --records-per-series 1200
  run plain "$lstream" "${args[@]}" --until end --predictions-topic plain --predictions next,eval \
    --predictions-out "$work/plain.csv"
  dir=$work/snaps
  for point in 30 write 80 write 149; do # (kill_at, lib.sh: each is reached)
    kill_at "$point" "$lstream" "${args[@]}" --until end --predictions-topic killed \
      --predictions next,eval --predictions-out "$work/killed.csv" --snapshot-dir "$dir" \
      --snapshot-every 5
    echo "killed at $point"
  done
  run resumed "$lstream" "${args[@]}" --until end --predictions-topic killed \
    --predictions next,eval --predictions-out "$work/killed.csv" --snapshot-dir "$dir" \
    --snapshot-every 5
  grep -q 'resumed from' "$work/resumed.err" || fail "the last run did not resume"
  grep '^predictions' "$work/resumed.out"
  $check "$bootstrap" src killed --features 2 --expect next,eval --same-as plain \
    --file "$work/killed.csv" || fail "the killed runs' forecasts are wrong"
  cmp "$work/plain.csv" "$work/killed.csv" || fail "the files differ"
  ;;
live)
  start --topic preds:2
  dir=$work/snaps
  produce --series 8 --records-per-series 300 --rate 400 &
  producer=$!
  for i in 1 2 3 4; do
    live_trainer live$i 4
    if [ $i -lt 4 ]; then
      wait_step $pid $((3 * i)) || { cat "$work/live$i.err" >&2; fail "run $i stopped"; }
      sleep 0.$((RANDOM % 5))
      kill -9 $pid && echo "killed run $i"
      wait $pid 2>/dev/null || true
    fi
  done
  wait $producer
  wait_forecasts preds 2400
  kill -TERM $pid
  wait $pid || { cat "$work/live4.err" >&2; fail "the last run exited $?"; }
  grep -q 'resumed from' "$work/live4.err" || fail "the last run did not resume"
  grep '^predictions' "$work/live4.out"
  $check "$bootstrap" src preds --features 2 --expect next || fail "forecasts lost or twice"
  ;;
term)
  start --topic preds:2
  dir=$work/snaps
  # A model whose steps take a while (hidden 128): records read while one
  # runs are forecast on the serving thread (--serve-thread, the default),
  # counted in the summary's during_steps.
  args+=(--hidden 128)
  during=0
  # 8 series x 1500 records at 400 records/s: about 30 s of records flowing.
  produce --series 8 --records-per-series 1500 --rate 400 &
  producer=$!
  trap 'kill $producer 2>/dev/null || true; cleanup' EXIT # a failure stops the feed too
  last=-1 # (resumed_from_step without a snapshot)
  for i in 1 2 3 4; do
    live_trainer term$i 100000
    if [ $i -lt 4 ]; then
      # A few steps in, records still arriving and forecasts going out.
      wait_step $pid $((last + 3)) || { cat "$work/term$i.err" >&2; fail "run $i stopped"; }
      kill -0 $producer 2>/dev/null || fail "the feed ended before run $i was stopped"
    else
      wait $producer
      wait_forecasts preds 12000
    fi
    kill -TERM $pid
    rc=0
    wait $pid || rc=$?
    [ $rc = 0 ] || { cat "$work/term$i.err" >&2; fail "run $i exited $rc after SIGTERM"; }
    steps=$(field "$work/term$i.out" summary steps)
    resumed=$(field "$work/term$i.out" snapshots resumed_from_step)
    during=$((during + $(field "$work/term$i.out" predictions during_steps)))
    echo "run $i: resumed from step $resumed, stopped at step $steps," \
      "$(field "$work/term$i.out" predictions during_steps) forecasts made during steps"
    [ "$resumed" = "$last" ] || fail "run $i resumed from step $resumed, not $last: steps redone"
    newest=$(sed -n 's/^snap-0*\([0-9][0-9]*\)$/\1/p' "$dir/latest")
    [ "$newest" = "$steps" ] ||
      fail "run $i: the newest snapshot is of step ${newest:-none}, not its last step $steps"
    last=$steps
  done
  [ "$during" -gt 0 ] || fail "no forecast was made while a step ran (the serving thread)"
  $check "$bootstrap" src preds --features 2 --expect next || fail "forecasts lost or twice"
  ;;
mpi) # with csv records and one target feature of the two
  start --topic preds:3
  produce --series 12 --records-per-series 120 --format csv
  run ranks mpirun -np 2 "$lstream" "${args[@]}" --until end --format csv --targets 1 \
    --predictions-topic preds --predictions next,eval --predictions-out "$work/p.csv"
  grep '^predictions' "$work/ranks.out"
  $check "$bootstrap" src preds --features 2 --targets 1 --format csv --expect next,eval ||
    fail "forecasts wrong"
  # Rank r wrote its own series' rows: those of partitions p % 2 == r.
  for r in 0 1; do
    awk -F, -v r=$r 'NR > 1 && $3 % 2 != r {bad = 1} END {exit bad}' "$work/p.csv.rank$r" ||
      fail "rank $r wrote rows of another rank's series"
    [ "$(wc -l <"$work/p.csv.rank$r")" -gt 1 ] || fail "rank $r wrote no rows"
  done
  ;;
outage)
  start --topic preds:2
  produce --series 8 --records-per-series 300
  rm -f "$work/metrics"
  "$lstream" "${args[@]}" --deadline-ms 50 --predictions-topic preds --predictions-buffer 100 \
    --metrics "$work/metrics" >"$work/out.out" 2>"$work/out.err" &
  pid=$!
  wait_step $pid 2 || fail "the trainer did not start"
  kill -USR1 "$broker_pid" # every broker down
  sleep 3
  kill -USR2 "$broker_pid"
  wait_forecasts preds 2400
  kill -TERM $pid
  wait $pid || { cat "$work/out.err" >&2; fail "the trainer exited $?"; }
  grep '^predictions' "$work/out.out"
  [ "$(field "$work/out.out" predictions waits)" -gt 0 ] ||
    fail "training did not wait for the full predictions buffer during the outage"
  $check "$bootstrap" src preds --features 2 --expect next || fail "forecasts lost or twice"
  ;;
bad_topic)
  start
  produce --series 2 --records-per-series 20
  if "$lstream" "${args[@]}" --until end --predictions-topic 'no such/topic' >"$work/b.out" \
    2>"$work/b.err"; then
    fail "a topic that cannot be written was accepted"
  fi
  grep -q "topic 'no such/topic' cannot be written" "$work/b.err" || {
    cat "$work/b.err" >&2
    fail "the error does not say which topic and why"
  }
  # The source topic itself: a feedback loop, refused before anything is read.
  if "$lstream" "${args[@]}" --until end --predictions-topic src >"$work/b.out" 2>"$work/b.err"; then
    fail "the source topic was accepted as the predictions topic"
  fi
  grep -q "predictions-topic 'src' is the topic trained on.*feedback loop" "$work/b.err" || {
    cat "$work/b.err" >&2
    fail "the error does not say that the predictions topic is the source"
  }
  ;;
*) fail "unknown case $case_name" ;;
esac
echo "PASS: $case_name"
