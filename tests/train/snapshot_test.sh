#!/usr/bin/env bash
# Snapshots and exactly-once recovery, end to end on the embedded broker.
#
# Usage: snapshot_test.sh LSTREAM CASE [STOPPER]
#   (STOPPER: stop_at.so, for kill, kill_mpi and evict)
#   kill      SIGKILL the trainer at several points (one during a snapshot
#             write), resume each time: the final parameters, every series'
#             state, normaliser, error sums and counts are bit-identical to
#             an uninterrupted run; the exported states hold the normalisers
#   kill_mpi  the same with mpirun -np 2, killing one rank
#   reshard   a snapshot at 2 ranks resumed at 3 and at 1: 80 steps later
#             within 1e-4 of the uninterrupted 2-rank run (float rounding,
#             see the case)
#   fallback  the newest snapshot damaged: --resume latest passes over it,
#             says so, and the run still ends bit-identical
#   evict     kill and resume with keys evicted and returning (--max-series):
#             bit-identical to the uninterrupted run
#   many      kill and evict again with many series and a snapshot every 2
#             steps of 4 windows: most series' model state stays in the
#             segment an earlier snapshot wrote it to (state/snapshot_model.c);
#             bit-identical ends all the same
#   settings  a resume that leaves out the model's options takes the
#             snapshot's (bit-identical end); another value of a fixed one
#             is refused naming it; a changed reported one is reported
set -euo pipefail
lstream=$1
case_name=$2
stopper=${3:-}
source "$(dirname "$0")/lib.sh"
mpi_env
start_broker --topic snap:4 --topic runs:4 --topic many:4 --topic bursts:4
"$lstream" produce --brokers "$bootstrap" --topic snap --series 48 --features 2 \
  --records-per-series 1400 --generator sine --noise 0.05 --seed 4 >/dev/null

# One thread a process: at this small shape two threads' barriers cost more
# than they save, and mpirun's ranks would oversubscribe the cores.
args=(train --brokers "$bootstrap" --topic snap --features 2 --window 8 --batch 16 --hidden 24
  --layers 2 --lr 0.005 --until end --quiet --threads 1)

# run NAME [launcher...] -- extra args: a complete run, its output in $work/NAME.
run() {
  local name=$1
  shift
  "$@" >"$work/$name.out" 2>"$work/$name.err" || {
    cat "$work/$name.err" >&2
    fail "$name exited $?"
  }
}

# killed_runs DIR LAUNCH...: runs LAUNCH repeatedly, killing it at each
# point of $points (kill_at, lib.sh: a step number, or "write", half way
# through writing a snapshot), then once to the end. Every point must be
# reached. Output of the last run in $work/resumed.out.
points="45 write 170 write 330"
every=10 # steps between snapshots
killed_runs() {
  local dir=$1
  shift
  local kills=0
  mkdir -p "$dir"
  for point in $points; do
    kill_at "$point" "$@" --snapshot-dir "$dir" --snapshot-every $every
    kills=$((kills + 1))
    echo "killed at $point"
  done
  echo "killed $kills times; snapshots: $(ls -A "$dir" | tr '\n' ' ')"
  run resumed "$@" --snapshot-dir "$dir" --snapshot-every $every
  grep -q 'resumed from' "$work/resumed.err" || fail "the last run did not resume"
}

same_digest() {
  local a b
  a=$(grep '^digest' "$work/$1.out")
  b=$(grep '^digest' "$work/$2.out")
  [ -n "$a" ] && [ "$a" = "$b" ] || fail "$1 and $2 differ: '$a' vs '$b'"
  echo "$1 = $2: $a"
}

# produce_runs TOPIC KEYS: KEYS keys sending in runs of 12 to 30 records
# (one key after another, as a market's symbols burst) into TOPIC.
produce_runs() {
  /usr/bin/python3 - "$work/$1.csv" "$2" <<'PY'
import math, random, sys
rng = random.Random(7)
t, k, out = 1704067200000, 0, []
for run in range(700):
    key = "K%02d" % rng.randrange(int(sys.argv[2]))
    for _ in range(rng.randrange(12, 31)):
        k += 1
        out.append("%s,%d,%.5f,%.5f" % (key, t + 1000 * k, math.sin(k / 7), math.cos(k / 11)))
open(sys.argv[1], "w").write("\n".join(out) + "\n")
PY
  "$lstream" produce --brokers "$bootstrap" --topic "$1" --csv "$work/$1.csv" >/dev/null
}

case "$case_name" in
kill)
  run plain "$lstream" "${args[@]}" --series-out "$work/plain.csv"
  killed_runs "$work/snaps" "$lstream" "${args[@]}" --series-out "$work/resumed.csv"
  same_digest plain resumed
  cmp "$work/plain.csv" "$work/resumed.csv" || fail "per-series counts differ"
  # nothing lost, nothing twice: each series trained its 1399 targets once
  awk -F, 'NR > 1 && $4 != 1399 {bad = 1} END {exit bad}' "$work/resumed.csv" ||
    fail "a series did not train each of its records exactly once"
  # The last snapshot's states hold every series' normaliser and error sums
  # (the run's final state: they match --series-out).
  "$lstream" export "$work/snaps/$(cat "$work/snaps/latest")" --states "$work/states.st" ||
    fail "export --states failed"
  /usr/bin/python3 "$(dirname "$0")/states_check.py" "$work/states.st" "$work/resumed.csv" ||
    fail "the exported normalisers disagree with the run"
  ;;
kill_mpi)
  kill_trainer() { # rank 1 only: mpirun then ends the job (and kill_at waits for it)
    local killed=1 rank_pid
    for rank_pid in $(pgrep -f "lstream train --brokers $bootstrap"); do
      if tr '\0' '\n' <"/proc/$rank_pid/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1'; then
        kill -9 "$rank_pid" && killed=0
      fi
    done
    return $killed
  }
  # Two threads a rank, as before --threads 1 was added above (once slower
  # runs for a poll to see the kill points; the points no longer need that).
  run plain mpirun -np 2 "$lstream" "${args[@]}" --threads 2
  killed_runs "$work/snaps" mpirun -np 2 "$lstream" "${args[@]}" --threads 2
  same_digest plain resumed
  ;;
reshard)
  # Compared at step 200, 80 steps after the re-shard (see below).
  run plain mpirun -np 2 "$lstream" "${args[@]}" --max-steps 200 --params-out "$work/plain.bin"
  run half mpirun -np 2 "$lstream" "${args[@]}" --max-steps 120 --snapshot-dir "$work/s2"
  for np in 3 1; do
    cp -r "$work/s2" "$work/s$np-from2"
    run "np$np" mpirun -np $np "$lstream" "${args[@]}" --max-steps 200 \
      --snapshot-dir "$work/s$np-from2" --params-out "$work/np$np.bin"
    grep -q 'resumed from .*(step 120; written by 2 ranks, resumed on '$np')' "$work/np$np.err" ||
      fail "np=$np did not resume, or the note miscounts the ranks: $(cat "$work/np$np.err")"
  done
  # Re-sharding changes which rank sums which gradients: float rounding
  # only, which training amplifies chaotically once it has run a while. At
  # the topic's end (step 569, ~2,800 updates: a step and its 4 replay
  # updates) uninterrupted runs on 1 and 2 ranks end apart by 1.6e-1 of the
  # largest parameter with --seed 1, 2.9e-4 and 1.6e-2 with seeds 2 and 3
  # (before issue 24's refit of the linear path: 3.7e-4, 4.5e-3, 6.7e-1);
  # one process given --lr one float ulp higher (0.0050000004) ends as far
  # from itself (1.0e-1, 2.9e-4, 9.8e-2; before the refit 2.4e-4, 1.2e-2,
  # 5.2e-1). Every series' season and linear path are bit-identical on 1 and
  # 2 ranks at every window, and with the mixing weights cut off from the
  # LSTM's outputs (so the LSTM's inputs and targets are bit-identical too)
  # the parameters still end 3.2e-1 apart: the end of the topic measures
  # that chaos, not the re-shard. At step 200 the runs still differ by
  # rounding alone: uninterrupted on 1, 2 and 3 ranks by at most 2.7e-6
  # (seeds 1-3, with and without the refit), the re-sharded ones by at most
  # 1.0e-6, while leaving out the last step moves them by 1.9e-2 to 2.3e-2.
  # The gap grows two- to threefold every 50 steps after 200 (seed 3
  # without the refit: 8.8e-6 at 250, 4.1e-5 at 350): 1e-4 leaves room for
  # that and is 200 times smaller than one step.
  /usr/bin/python3 "$(dirname "$0")/params_close.py" 1e-4 "$work/plain.bin" "$work/np3.bin" \
    "$work/np1.bin" || fail "re-sharded runs differ"
  ;;
fallback)
  run plain "$lstream" "${args[@]}"
  run first "$lstream" "${args[@]}" --max-steps 100 --snapshot-dir "$work/snaps" --snapshot-every 20
  newest=$(cat "$work/snaps/latest")
  # flip one byte in the middle of the newest snapshot's shard
  shard="$work/snaps/$newest/shard-0"
  size=$(stat -c %s "$shard")
  printf '\xff' | dd of="$shard" bs=1 seek=$((size / 2)) conv=notrunc status=none
  run resumed "$lstream" "${args[@]}" --snapshot-dir "$work/snaps"
  grep 'lstream train:' "$work/resumed.err" | sed -n 1,3p
  grep -q "passed over.*$newest" "$work/resumed.err" || fail "the damaged snapshot was not reported"
  grep -q 'resumed from' "$work/resumed.err" || fail "did not fall back to an earlier snapshot"
  same_digest plain resumed
  ;;
evict)
  # Keys leave and come back: 12 series a partition, 5 held (--max-series
  # 20 over 4 partitions), so a key is evicted and returns as a new series
  # again and again, and windows of several incarnations of a key are in
  # flight at every snapshot. Killed at several points and resumed, the run
  # ends bit-identical to the uninterrupted one, every record trained (or
  # evicted) as there.
  # 20 keys sending in runs of 12 to 30 records (one key after another, as a
  # market's symbols burst), 3 held per partition (--max-series 12 over 4):
  # a resumed run's first record touches its own key, and the key that
  # arrives next evicts the older of the other two held, which only the
  # restored eviction order tells (with 2 held, the one left is the only
  # choice: the order would go untested).
  produce_runs runs 20
  args=(train --brokers "$bootstrap" --topic runs --features 2 --window 8 --batch 16 --hidden 24
    --layers 2 --lr 0.005 --until end --quiet --threads 1 --max-series 12)
  run plain "$lstream" "${args[@]}" --series-out "$work/plain.csv"
  grep '^series' "$work/plain.out"
  [ "$(field "$work/plain.out" series evicted)" -gt 200 ] || fail "too few evictions to test"
  points="60 write 150 write 220"
  killed_runs "$work/snaps" "$lstream" "${args[@]}" --series-out "$work/resumed.csv"
  same_digest plain resumed
  cmp "$work/plain.csv" "$work/resumed.csv" || fail "per-series counts differ"
  ;;
many)
  # kill and evict again, with many series and a snapshot every 2 steps of
  # 4 windows: most series' model state stays in the segment an earlier
  # snapshot wrote it to, the shard naming its row (state/snapshot_model.c):
  # 512 series (a few dozen train between two snapshots written), then 600
  # keys in bursts through 200 slots (evictions: slots emptied, reused and
  # moved).
  every=2
  "$lstream" produce --brokers "$bootstrap" --topic many --series 512 --features 2 \
    --records-per-series 100 --generator sine --noise 0.05 --seed 5 >/dev/null
  args=(train --brokers "$bootstrap" --topic many --features 2 --window 8 --batch 4 --hidden 24
    --layers 2 --lr 0.005 --until end --quiet --threads 1 --max-steps 400)
  run plain "$lstream" "${args[@]}" --series-out "$work/plain.csv"
  killed_runs "$work/snaps" "$lstream" "${args[@]}" --series-out "$work/resumed.csv"
  same_digest plain resumed
  cmp "$work/plain.csv" "$work/resumed.csv" || fail "per-series counts differ"
  produce_runs bursts 600
  args=(train --brokers "$bootstrap" --topic bursts --features 2 --window 8 --batch 4
    --hidden 24 --layers 2 --lr 0.005 --until end --quiet --threads 1 --max-series 200)
  run plain_evict "$lstream" "${args[@]}" --series-out "$work/plain_evict.csv"
  [ "$(field "$work/plain_evict.out" series evicted)" -gt 100 ] || fail "too few evictions to test"
  points="60 write 150 write 220"
  killed_runs "$work/snaps_evict" "$lstream" "${args[@]}" --series-out "$work/resumed.csv"
  same_digest plain_evict resumed
  cmp "$work/plain_evict.csv" "$work/resumed.csv" || fail "per-series counts differ (evict)"
  ;;
settings)
  # A resume that leaves out the model's options takes them from the
  # snapshot and ends bit-identical to the uninterrupted run; one that gives
  # another value of a fixed option is refused, naming it and both values;
  # a reported option that changes is reported.
  run plain "$lstream" "${args[@]}" --max-steps 60
  run first "$lstream" "${args[@]}" --max-steps 30 --snapshot-dir "$work/snaps"
  bare=(train --brokers "$bootstrap" --topic snap --until end --quiet --threads 1)
  run resumed "$lstream" "${bare[@]}" --max-steps 60 --snapshot-dir "$work/snaps"
  grep 'lstream train:' "$work/resumed.err"
  for kv in features=2 window=8 batch=16 hidden=24 layers=2 lr=0.0050000000000000001; do
    grep -q "$kv taken from the snapshot" "$work/resumed.err" ||
      fail "${kv%%=*} was not taken from the snapshot"
  done
  same_digest plain resumed
  rc=0
  "$lstream" "${bare[@]}" --hidden 32 --snapshot-dir "$work/snaps" >"$work/refused.out" \
    2>"$work/refused.err" || rc=$?
  [ $rc = 1 ] || fail "--hidden 32 against a snapshot of hidden 24 exited $rc"
  grep -q 'written with hidden=24; this run gives hidden=32' "$work/refused.err" ||
    fail "the refusal does not name the option: $(cat "$work/refused.err")"
  run noted "$lstream" "${bare[@]}" --max-steps 61 --max-series 40 --snapshot-dir "$work/snaps"
  grep -q 'max_series changed from 0 to 40 across the resume' "$work/noted.err" ||
    fail "a changed max_series was not reported: $(cat "$work/noted.err")"
  ;;
*) fail "unknown case $case_name" ;;
esac
echo "PASS: $case_name"
