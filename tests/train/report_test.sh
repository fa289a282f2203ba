#!/usr/bin/env bash
# Seeing the forecasts (issue 27), end to end on the embedded broker.
#
# Usage: report_test.sh LSTREAM CASE KEEP_DIR
#   report   a replay writes --predictions-out; `lstream report` on it, and
#            on it split into two files by partition (as two ranks write
#            them): the same tables; every figure equal to numpy's on the
#            CSV (report_check.py, 1e-9), the PNGs read back (size, lines
#            drawn in the plot area), index.html showing them. The report
#            is kept in KEEP_DIR/report.
#   predict  `lstream predict` at a snapshot reproduces, bit for bit, the
#            forecasts the trainer made with that snapshot's model
#            (--predictions-out rows of its step), also at every horizon of
#            --horizon 3; `export --states` holds
#            each series' calibration factor and normaliser
#   live     a live run with --http: / loaded in headless Chromium while a
#            producer writes: it renders, its curves have points, the series
#            picker shows a series and its forecasts (a screenshot and the
#            page's DOM kept in KEEP_DIR/live); skipped only where Chromium
#            cannot start
set -euo pipefail
lstream=$1
case_name=$2
keep=$3
source "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$keep"

source "$(dirname "$0")/forecasts_lib.sh"

case "$case_name" in
report)
  start
  produce --series 12 --records-per-series 300
  run train "$lstream" "${args[@]}" --until end --predictions next,eval \
    --predictions-out "$work/p.csv"
  # Two rank files: the rows of partitions 0, 2 and of 1, 3.
  awk -F, -v w="$work" 'NR == 1 { print > (w "/p.0"); print > (w "/p.1"); next }
    { print > (w "/p." ($3 % 2)) }' "$work/p.csv"
  rm -rf "$keep/report"
  run report "$lstream" report "$work/p.0" "$work/p.1" --out "$keep/report" --series SYM0003 \
    --top 2
  run report1 "$lstream" report "$work/p.csv" --out "$work/one" --series SYM0003 --top 2 --quiet
  for t in overall series ratio; do
    cmp "$keep/report/$t.csv" "$work/one/$t.csv" || fail "$t.csv differs between one file and two"
  done
  grep -q '^| 0 | 1 | whole run | 3588 |' "$work/report.out" ||
    fail "the summary lacks target 0's 3588 next forecasts: $(cat "$work/report.out")"
  [ ! -s "$work/report1.out" ] || fail "--quiet printed"
  /usr/bin/python3 "$here/report_check.py" "$keep/report" "$work/p.0" "$work/p.1" ||
    fail "the report differs from numpy's figures"
  # A bad file, a series not in it: clear errors, exit 1.
  printf 'kind,series,offset,time\n' >"$work/bad.csv"
  ! "$lstream" report "$work/bad.csv" --out "$work/x" 2>"$work/bad.err" || fail "a bad file passed"
  grep -q 'no forecast_X column' "$work/bad.err" || fail "unclear: $(cat "$work/bad.err")"
  ! "$lstream" report "$work/p.csv" --out "$work/x" --series NOPE 2>"$work/nope.err" ||
    fail "an unknown series passed"
  grep -q "'NOPE'" "$work/nope.err" || fail "unclear: $(cat "$work/nope.err")"
  ;;
predict)
  start
  # 8 series of two features (a level near 100), written from a file that
  # predict reads too.
  /usr/bin/python3 -c '
import math, random
random.seed(3)
for i in range(160):
    for k in range(8):
        print(f"K{k},{1700000000000 + i * 1000},{math.sin(i / 7 + k) + random.gauss(0, .05):.5f},"
              f"{100 + 10 * math.cos(i / 11 + k) + random.gauss(0, .5):.4f}")' >"$work/rec.csv"
  "$lstream" produce --brokers "$bootstrap" --topic src --csv "$work/rec.csv" >/dev/null
  # Two threads and a batch of 8: the forward split across threads as a run's.
  run train "$lstream" "${args[@]}" --threads 2 --batch 8 --until end --predictions next,eval \
    --predictions-out "$work/p.csv" --snapshot-dir "$work/snaps" --snapshot-every 8 --snapshot-keep 10
  /usr/bin/python3 "$here/predict_audit.py" "$lstream" "$work/snaps" "$work/p.csv" \
    "$work/rec.csv" || fail "predict does not reproduce the trainer's forecasts"
  # With horizons: every h's forecast (the linear path's iterated ones
  # combined with the LSTM's), a row per h.
  run train "$lstream" "${args[@]}" --threads 2 --batch 8 --until end --predictions next \
    --horizon 3 --predictions-out "$work/p3.csv" --snapshot-dir "$work/snaps3" \
    --snapshot-every 8 --snapshot-keep 10
  /usr/bin/python3 "$here/predict_audit.py" "$lstream" "$work/snaps3" "$work/p3.csv" \
    "$work/rec.csv" || fail "predict does not reproduce the trainer's forecasts at every horizon"
  # With quantiles: each level's, calibrated by the series' corrections.
  run train "$lstream" "${args[@]}" --threads 2 --batch 8 --until end --predictions next \
    --horizon 2 --quantiles 0.1,0.5,0.9 --predictions-out "$work/pq.csv" \
    --snapshot-dir "$work/snapsq" --snapshot-every 8 --snapshot-keep 10
  head -1 "$work/pq.csv" | grep -q ',q0.1_0,q0.1_1,q0.5_0' || fail "no quantiles: $(head -1 "$work/pq.csv")"
  /usr/bin/python3 "$here/predict_audit.py" "$lstream" "$work/snapsq" "$work/pq.csv" \
    "$work/rec.csv" || fail "predict does not reproduce the trainer's quantile forecasts"
  ! "$lstream" predict --snapshot "$work/snaps" --series NOPE --records "$work/rec.csv" \
    2>"$work/nope.err" || fail "an unknown series passed"
  grep -q "no series 'NOPE'" "$work/nope.err" || fail "unclear: $(cat "$work/nope.err")"
  ;;
live)
  chromium=$(command -v chromium || command -v chromium-browser || true)
  # Headless as root in a closed network (README, Testing): a fresh profile.
  cflags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
    --disable-background-networking --disable-component-update --disable-sync)
  probe=$("${chromium:-false}" "${cflags[@]}" --user-data-dir="$work/c0" \
    --dump-dom 'data:text/html,<p>started</p>' 2>"$work/chromium.err" || true)
  if [[ $probe != *started* ]]; then
    echo "SKIP: Chromium cannot start (${chromium:-not installed}): $(tail -n 3 "$work/chromium.err")"
    exit 77
  fi
  start_broker --topic live:4
  "$lstream" produce --brokers "$bootstrap" --topic live --series 6 --features 2 \
    --records-per-series 100000 --generator sine --seed 3 --rate 400 >/dev/null 2>&1 &
  producer=$!
  # The log exists before the loop below reads it (the background job's
  # redirection may come later: sed on a missing file ends this script).
  : >"$work/train.err"
  "$lstream" train --brokers "$bootstrap" --topic live --features 2 --window 8 --batch 8 \
    --hidden 16 --threads 1 --http 127.0.0.1:0 --snapshot-dir "$work/snaps" \
    --snapshot-every 50 --log-every 1000000 >"$work/train.out" 2>>"$work/train.err" &
  trainer=$!
  ready() {
    curl -s --max-time 5 "$url/api/history" |
      /usr/bin/python3 -c 'import json, sys; sys.exit(len(json.load(sys.stdin)["step"]) < 20)' &&
      curl -s --max-time 5 "$url/api/series" | grep -q SYM
  }
  url=
  for _ in $(seq 600); do
    url=$(sed -n "s/.* lstream train: rank 0's live page: \(http[^ ]*\)\/$/\1/p" "$work/train.err")
    [ -n "$url" ] && ready && break
    kill -0 $trainer 2>/dev/null || { cat "$work/train.err" >&2; fail "the trainer exited"; }
    sleep 0.1
  done
  [ -n "$url" ] || fail "no live page address in the trainer's log"
  # The page as a person's browser gets it: its scripts run for 5 s of the
  # page's (virtual) time, then its DOM and a screenshot.
  mkdir -p "$keep/live"
  "$chromium" "${cflags[@]}" --user-data-dir="$work/c1" --virtual-time-budget=5000 \
    --dump-dom "$url/" >"$keep/live/dom.html" 2>"$work/chromium.err" ||
    fail "chromium failed: $(tail -n 3 "$work/chromium.err")"
  "$chromium" "${cflags[@]}" --user-data-dir="$work/c2" --virtual-time-budget=5000 \
    --window-size=1280,1400 --screenshot="$keep/live/live.png" "$url/" 2>"$work/chromium.err" ||
    fail "chromium's screenshot failed: $(tail -n 3 "$work/chromium.err")"
  kill -INT $trainer $producer
  wait $trainer || fail "the trainer exited $? on SIGINT: $(tail -n 5 "$work/train.err")"
  /usr/bin/python3 "$here/page_check.py" "$keep/live" ||
    fail "the live page is not as it should be (the trainer's log: $(tail -n 5 "$work/train.err"))"
  ;;
*)
  fail "unknown case $case_name"
  ;;
esac
echo "report_test $case_name: ok"
