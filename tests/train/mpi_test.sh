#!/usr/bin/env bash
# Replicas under mpirun (CPU, MPI all-reduce) on the embedded broker.
#
# Usage: mpi_test.sh LSTREAM CASE
#   equivalence  2 and 3 ranks end within 1e-5 of 1 rank on the same windows,
#                with the all-reduce after backward (the default on the CPU)
#                and overlapped with it; every series is owned by exactly one rank; a fixed N is
#                bit-identical across runs
#   uneven       one partition 10x the others, empty partitions, more ranks
#                than busy partitions: no deadlock, all data trained
#   rank_death   a rank killed with SIGKILL mid-run: the job ends with an
#                error naming it, it does not hang
set -euo pipefail
lstream=$1
case_name=$2
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
mpi_env

case "$case_name" in
equivalence)
  start_broker --topic eq:5
  "$lstream" produce --brokers "$bootstrap" --topic eq --series 40 --features 2 \
    --records-per-series 240 --generator sine --seed 9 >/dev/null
  args=(train --brokers "$bootstrap" --topic eq --features 2 --window 6 --batch 20 --hidden 10
    --layers 2 --lr 0.01 --until end --quiet --threads 1)
  for np in 1 2 3; do
    timeout 240 mpirun -np $np "$lstream" "${args[@]}" --params-out "$work/p$np.bin" \
      --series-out "$work/s$np.csv" >"$work/out$np" || fail "mpirun -np $np exited $?"
  done
  timeout 240 mpirun -np 2 "$lstream" "${args[@]}" >"$work/out2b" || fail "second -np 2 run"
  timeout 240 mpirun -np 3 "$lstream" "${args[@]}" --overlap true --params-out "$work/p3s.bin" \
    >"$work/out3s" || fail "mpirun -np 3 --overlap true exited $?"
  # 1 and N ranks sum the same gradients in another order: float rounding,
  # ~1e-7 of the largest parameter; a missing or doubled window is ~1e-3.
  /usr/bin/python3 "$here/params_close.py" 1e-5 "$work/p1.bin" "$work/p2.bin" "$work/p3.bin" \
    "$work/p3s.bin" ||
    fail "parameters differ"
  for np in 2 3; do
    # Each series in exactly one rank's file, with the 1-rank run's counts
    # (columns 1-5; its error sums are float sums of forecasts that differ
    # by rounding, like the parameters).
    cat "$work"/s$np.csv.rank* | grep -v '^series,' | cut -d, -f1-5 | sort >"$work/all$np"
    [ "$(cut -d, -f1 "$work/all$np" | sort | uniq -d)" = "" ] || fail "a series on two ranks (np=$np)"
    grep -v '^series,' "$work/s1.csv" | cut -d, -f1-5 | sort >"$work/all1"
    cmp -s "$work/all1" "$work/all$np" || fail "np=$np trained other series or counts than np=1"
    for r in $(seq 0 $((np - 1))); do
      # rank r owns the partitions p with p % np == r
      awk -F, -v r=$r -v n=$np 'NR > 1 && $2 % n != r {bad = 1} END {exit bad}' \
        "$work/s$np.csv.rank$r" || fail "rank $r holds a series of another rank's partition"
    done
  done
  [ "$(grep '^digest' "$work/out2")" = "$(grep '^digest' "$work/out2b")" ] ||
    fail "two runs with 2 ranks differ"
  grep '^summary' "$work/out1" "$work/out3"
  ;;
uneven)
  # A: 1000 records; B, C, D: 100 each; 8 partitions, so most are empty and
  # A's is ten times the busiest other.
  {
    for i in $(seq 0 999); do echo "A,$((1700000000000 + i * 1000)),$((i % 17))"; done
    for s in B C D; do for i in $(seq 0 99); do echo "$s,$((1700000000000 + i * 1000)),$i"; done; done
  } | sort -t, -k2,2n >"$work/ticks.csv"
  start_broker --topic un:8
  "$lstream" produce --brokers "$bootstrap" --topic un --csv "$work/ticks.csv" >/dev/null
  for np in 3 5; do
    timeout 120 mpirun -np $np "$lstream" train --brokers "$bootstrap" --topic un --features 1 \
      --window 8 --batch 8 --hidden 4 --until end --quiet >"$work/out$np" ||
      fail "mpirun -np $np exited $? (124: it hung)"
    records=$(field "$work/out$np" summary records)
    [ "$records" = $((999 + 3 * 99)) ] || fail "np=$np trained $records records, expected 1296"
  done
  ;;
rank_death)
  start_broker --topic live:4
  "$lstream" produce --brokers "$bootstrap" --topic live --series 16 --features 1 \
    --records-per-series 200 --seed 2 >/dev/null
  # Live mode: the job would run forever; rank 1 is killed once it trains.
  mpirun -np 2 "$lstream" train --brokers "$bootstrap" --topic live --features 1 --window 4 \
    --batch 4 --hidden 4 --until live --deadline-ms 50 --metrics "$work/metrics" \
    >"$work/out" 2>&1 &
  job=$!
  for _ in $(seq 600); do [ -s "$work/metrics" ] && break; sleep 0.1; done
  [ -s "$work/metrics" ] || fail "the job never trained"
  victim=
  for pid in $(pgrep -f "lstream train --brokers $bootstrap"); do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1' && victim=$pid
  done
  [ -n "$victim" ] || fail "no rank 1 process found"
  kill -9 "$victim"
  start=$(date +%s)
  rc=0
  for _ in $(seq 600); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
  if kill -0 $job 2>/dev/null; then
    kill -9 $job
    fail "the job still runs 60 s after rank 1 died"
  fi
  wait $job || rc=$?
  echo "job exited $rc after $(($(date +%s) - start)) s:"
  tail -5 "$work/out"
  [ $rc -ne 0 ] || fail "the job exited 0 although a rank died"
  grep -qiE 'rank 1|signal 9|killed' "$work/out" || fail "no message names the dead rank"
  ;;
*) fail "unknown case $case_name" ;;
esac
echo "PASS: $case_name"
