#!/usr/bin/env bash
# Watching a run, end to end on the embedded broker (tests/train/watch_check.py
# holds the checks, each with an outside reader).
#
# Usage: watch_test.sh LSTREAM CASE [VENV]
#   http         a live run with --http: /metrics scraped with curl and parsed
#                by Prometheus' parser; 404, 405, HEAD; slow and malformed
#                clients do not stall a scrape; /health 200, then 503 with a
#                JSON reason while the broker is down (lstream broker takes
#                SIGUSR1/SIGUSR2), 200 once it is back; the per-target
#                figures (data units) labelled target=0 and 1
#   slow         a live run with --http: 80 clients from another address
#                trickling a request a byte at a time (watch_check.py slow)
#                do not keep /health from answering within 1 s
#   snapfail     a live run with --http and snapshots, records flowing: /health
#                200 while snapshots commit; the snapshot directory replaced
#                by a file, 503 once 2 snapshots in a row have failed
#                (--health-snapshot-failures 2), naming the last failure;
#                the directory back, 200 again after the next commit
#   tensorboard  a replay with --tensorboard and snapshots, killed with
#                SIGKILL past a snapshot, resumed to the end; TensorBoard's own
#                reader (the tensorboard package from PyPI, installed into the
#                venv VENV if it is not there: no network, no test) sees steps
#                1..N strictly increasing with the --metrics file's values,
#                the per-target ones too
set -euo pipefail
lstream=$1
case_name=$2
venv=${3:-}
here=$(dirname "$0")
source "$here/lib.sh"
check() { /usr/bin/python3 "$here/watch_check.py" "$@"; }

# The URL a rank prints ("rank 0 serves http://127.0.0.1:PORT/metrics ...").
url_in() { sed -n 's/.* lstream train: rank 0 serves \(http[^ ]*\)\/metrics .*/\1/p' "$1"; }
status_of() { curl -s -o "$work/body" -w '%{http_code}' --max-time 10 "$@"; }
health_is() { [ "$(status_of "$url/health")" = "$1" ]; }

case "$case_name" in
http)
  start_broker --topic live:4
  "$lstream" produce --brokers "$bootstrap" --topic live --series 16 --features 2 \
    --records-per-series 4000 --generator sine --seed 3 >/dev/null
  # Live mode: it trains what is there, then idles, the loop still turning;
  # forecasts 3 records ahead (the per-horizon families) with quantiles (the
  # per-quantile families).
  "$lstream" train --brokers "$bootstrap" --topic live --features 2 --window 8 --batch 8 \
    --hidden 16 --horizon 3 --quantiles 0.1,0.9 --http 127.0.0.1:0 --snapshot-dir "$work/snaps" --snapshot-every 20 \
    --log-every 1000000 >"$work/train.out" 2>"$work/train.err" &
  train_pid=$!
  wait_for "the server's address" 60 grep -q 'serves http' "$work/train.err"
  url=$(url_in "$work/train.err")
  steps_past() {
    curl -s --max-time 5 "$url/metrics" >"$work/m" &&
      awk -v n="$1" '/^lstream_steps_total/ && $2 >= n {ok = 1} END {exit !ok}' "$work/m"
  }
  wait_for "20 steps" 120 steps_past 20
  curl -sf --max-time 10 "$url/metrics" -o "$work/metrics.txt" || fail "curl /metrics failed"
  check metrics "$work/metrics.txt" 0 4 0,1 3 0.1,0.9
  [ "$(status_of "$url/nowhere")" = 404 ] || fail "/nowhere is not 404"
  [ "$(status_of -X POST "$url/metrics")" = 405 ] || fail "POST /metrics is not 405"
  [ "$(status_of -X DELETE "$url/health")" = 405 ] || fail "DELETE /health is not 405"
  [ "$(status_of -I "$url/metrics")" = 200 ] || fail "HEAD /metrics is not 200"
  check clients "$url"
  [ "$(status_of "$url/health")" = 200 ] || fail "/health is not 200: $(cat "$work/body")"
  # The cluster goes away: 503 with the reason; it comes back: 200.
  kill -USR1 "$broker_pid"
  wait_for "/health to answer 503" 60 health_is 503
  /usr/bin/python3 -c 'import json, sys; h = json.load(open(sys.argv[1]))
assert h["status"] == "unhealthy" and h["consumer_connected"] is False, h
assert any("consumer" in r for r in h["reasons"]), h
print("503:", h["reasons"])' "$work/body" || fail "the 503 body: $(cat "$work/body")"
  kill -USR2 "$broker_pid"
  wait_for "/health to answer 200 again" 120 health_is 200
  echo "200 again: $(cat "$work/body")"
  kill -TERM "$train_pid"
  wait "$train_pid" || fail "the trainer exited $? after SIGTERM: $(tail -3 "$work/train.err")"
  ;;
slow)
  start_broker --topic live:2
  "$lstream" produce --brokers "$bootstrap" --topic live --series 4 --features 1 \
    --records-per-series 200 --generator sine --seed 3 >/dev/null
  "$lstream" train --brokers "$bootstrap" --topic live --features 1 --window 8 --batch 4 \
    --hidden 4 --http 127.0.0.1:0 --log-every 1000000 >"$work/train.out" 2>"$work/train.err" &
  train_pid=$!
  wait_for "the server's address" 60 grep -q 'serves http' "$work/train.err"
  url=$(url_in "$work/train.err")
  check slow "$url"
  kill -TERM "$train_pid"
  wait "$train_pid" || fail "the trainer exited $? after SIGTERM: $(tail -3 "$work/train.err")"
  ;;
snapfail)
  start_broker --topic sf:2
  # 4 series at 200 records/s for a minute: steps, and snapshots due, all along.
  "$lstream" produce --brokers "$bootstrap" --topic sf --series 4 --features 1 \
    --records-per-series 3000 --rate 200 --generator sine --seed 3 >/dev/null 2>&1 &
  producer=$!
  trap 'kill $producer 2>/dev/null || true; cleanup' EXIT
  "$lstream" train --brokers "$bootstrap" --topic sf --features 1 --window 4 --batch 4 \
    --hidden 4 --deadline-ms 50 --http 127.0.0.1:0 --snapshot-dir "$work/snaps" \
    --snapshot-every 2 --health-snapshot-failures 2 >"$work/train.out" 2>"$work/train.err" &
  train_pid=$!
  wait_for "the server's address" 60 grep -q 'serves http' "$work/train.err"
  url=$(url_in "$work/train.err")
  committed() { grep -c 'snapshot of step [0-9]* committed' "$work/train.err" || true; }
  failed() { grep -c 'snapshot of step [0-9]* failed' "$work/train.err" || true; }
  committed_over() { [ "$(committed)" -gt "$1" ]; }
  failed_over() { [ "$(failed)" -gt "$1" ]; }
  wait_for "a snapshot committed" 60 committed_over 0
  health_is 200 || fail "/health while snapshots commit: $(cat "$work/body")"
  # The directory and a file trade names in one step (renameat2's
  # RENAME_EXCHANGE): the live trainer, snapshotting every 2 steps, must
  # never find the name free (it would make the directory again).
  exchange() {
    /usr/bin/python3 - "$1" "$2" <<'PY' || fail "cannot exchange $1 and $2"
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
if libc.renameat2(AT_FDCWD, sys.argv[1].encode(), AT_FDCWD, sys.argv[2].encode(),
                  RENAME_EXCHANGE) != 0:
    sys.exit(os.strerror(ctypes.get_errno()))
PY
  }
  echo "not a directory" >"$work/snaps.file"
  exchange "$work/snaps" "$work/snaps.file" # snaps: the file; snaps.file: the directory
  wait_for "2 snapshots to fail" 60 failed_over 1
  health_is 503 || fail "/health after $(failed) snapshots failed: $(cat "$work/body")"
  grep -q '"the last [0-9]* snapshots failed (bound 2 in a row), the last: snapshot of step' \
    "$work/body" || fail "/health does not name the failed snapshots: $(cat "$work/body")"
  echo "503: $(cat "$work/body")"
  now=$(committed)
  exchange "$work/snaps" "$work/snaps.file"
  wait_for "a snapshot committed again" 60 committed_over "$now"
  health_is 200 || fail "/health after a commit: $(cat "$work/body")"
  kill -TERM "$train_pid"
  wait "$train_pid" || fail "the trainer exited $? after SIGTERM: $(tail -3 "$work/train.err")"
  ;;
tensorboard)
  [ -n "$venv" ] || fail "no venv directory given"
  if ! "$venv/bin/python" -c 'import tensorboard' 2>/dev/null; then
    /usr/bin/python3 -m venv "$venv" || fail "cannot create the venv $venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check tensorboard ||
      fail "cannot install tensorboard from PyPI into $venv (no network?)"
  fi
  start_broker --topic tb:4
  "$lstream" produce --brokers "$bootstrap" --topic tb --series 64 --features 2 \
    --records-per-series 1000 --generator sine --noise 0.05 --seed 5 >/dev/null
  args=(train --brokers "$bootstrap" --topic tb --features 2 --window 8 --batch 16 --hidden 16
    --horizon 2 --quantiles 0.5 --until end --snapshot-dir "$work/snaps" --snapshot-every 50
    --tensorboard "$work/tb" --metrics "$work/metrics.jsonl" --log-every 1000000)
  "$lstream" "${args[@]}" >"$work/killed.out" 2>"$work/killed.err" &
  pid=$!
  # Killed once a snapshot's commit is seen (the events written until then
  # are flushed when it is), about 50 steps before the next.
  until grep -q 'snapshot of step .* committed' "$work/killed.err"; do
    kill -0 "$pid" 2>/dev/null || fail "the run ended before a snapshot was committed"
    sleep 0.005
  done
  kill -9 "$pid" || fail "the run ended before it could be killed"
  wait "$pid" 2>/dev/null || true
  from=$(sed -n 's/^snap-0*\([0-9][0-9]*\)$/\1/p' "$work/snaps/latest")
  echo "killed after the snapshot of step $from"
  "$lstream" "${args[@]}" >"$work/resumed.out" 2>"$work/resumed.err" ||
    fail "the resumed run failed: $(tail -3 "$work/resumed.err")"
  grep -q "resumed from .*step $from" "$work/resumed.err" || fail "the second run did not resume"
  "$venv/bin/python" "$here/watch_check.py" tensorboard "$work/tb" "$work/metrics.jsonl" "$from"
  ;;
*) fail "unknown case $case_name" ;;
esac
echo "PASS: $case_name"
