#!/usr/bin/env bash
# What the live page (--http's /, train/page.c) costs the step loop, as
# http_overhead.sh measures /metrics: the same replay in three set-ups,
# alternating, ROUNDS rounds: without --http; with --http and nobody looking
# (the page's history is kept, its forecast rings are not filled); and
# with the page open (its polling every 2 s: /api/status, /api/history,
# /api/series, /api/forecasts of a series; / and /chart.js once). The
# medians of windows/s and of CPU seconds per 1000 windows, and the costs
# against the run without --http. Then, where perf can sample (PERF=0
# skips it), a run nobody looks at and one with the page open under `perf
# record -e cpu-clock`:
# the share of the process's samples in the page's code on the step loop
# and in the HTTP thread, a figure other jobs on the machine hardly move.
#
# Usage: tests/bench/page_cost.sh [BUILD_DIR]
#   env: ROUNDS (5) THREADS (1) B (64) F (4) H (64) L (1) T (32) SERIES (512)
#        RECORDS (4097)
set -euo pipefail
build=${1:-build}
. "$(dirname "$0")/served_lib.sh"
url="http://127.0.0.1:$port"

# The page's requests while process $1 runs: what an open page asks.
poll() {
  local pid=$1 key=
  curl -s --max-time 2 "$url/" -o /dev/null || true
  curl -s --max-time 2 "$url/chart.js" -o /dev/null || true
  while kill -0 "$pid" 2>/dev/null; do
    for p in api/status api/history api/series; do
      curl -s --max-time 2 "$url/$p" -o "$work/$(basename $p).json" || true
    done
    key=$(sed -n 's/^{"series":\["\([^"]*\)".*/\1/p' "$work/series.json" 2>/dev/null || true)
    [ -z "$key" ] || curl -s --max-time 2 "$url/api/forecasts?series=$key" -o /dev/null || true
    sleep 2
  done
}

# run NAME [ARGS...]: one run, its figures; NAME open polls the page.
run() {
  local name=$1
  shift
  /usr/bin/time -o "$work/$name.time" -f '%U %S' "$lstream" "${args[@]}" "$@" \
    >"$work/$name.out" &
  local pid=$!
  [ "$name" != open ] || poll $pid
  wait $pid
  figures "$work/$name.out" "$work/$name.time"
}

w0=() w1=() w2=() c0=() c1=() c2=()
for r in $(seq "$ROUNDS"); do
  order=(plain idle open)
  [ $((r % 2)) -eq 1 ] || order=(open idle plain)
  for s in "${order[@]}"; do
    case $s in
    plain) a=$(run plain) ;;
    idle) b=$(run idle --http "127.0.0.1:$port") ;;
    open) c=$(run open --http "127.0.0.1:$port") ;;
    esac
  done
  w0+=("${a% *}") c0+=("${a#* }") w1+=("${b% *}") c1+=("${b#* }") w2+=("${c% *}") c2+=("${c#* }")
  echo "round $r: windows_per_s plain=${a% *} nobody_looking=${b% *} page_open=${c% *}" \
    "cpu_s_per_1000_windows plain=${a#* } nobody_looking=${b#* } page_open=${c#* }"
done
awk -v a="$(median "${w0[@]}")" -v b="$(median "${w1[@]}")" -v c="$(median "${w2[@]}")" \
  -v ca="$(median "${c0[@]}")" -v cb="$(median "${c1[@]}")" -v cc="$(median "${c2[@]}")" \
  -v r="$ROUNDS" -v shape="B=$B F=$F H=$H L=$L T=$T threads=$THREADS" 'BEGIN {
  printf "page_cost %s rounds=%d median_windows_per_s plain=%.1f nobody_looking=%.1f (cost %.2f%%) page_open=%.1f (cost %.2f%%)\n", shape, r, a, b, (a / b - 1) * 100, c, (a / c - 1) * 100
  printf "page_cost median_cpu_s_per_1000_windows plain=%.4f nobody_looking=%.4f (cost %.2f%%) page_open=%.4f (cost %.2f%%)\n", ca, cb, (cb / ca - 1) * 100, cc, (cc / ca - 1) * 100
}'

# The page's share of CPU samples in one run nobody looks at and one with
# the page open.
if [ "${PERF:-1}" != 0 ] && command -v perf >/dev/null &&
  perf record -q -e cpu-clock -o "$work/probe.data" true >/dev/null 2>&1; then
  for s in nobody_looking page_open; do
    perf record -q -e cpu-clock -F 2000 -o "$work/perf.data" -- "$lstream" "${args[@]}" \
      --http "127.0.0.1:$port" >/dev/null 2>&1 &
    pid=$!
    [ $s = nobody_looking ] || poll $pid
    wait $pid
    report() { perf report -i "$work/perf.data" --percent-limit 0 --sort "$1" -F "sample,$1" 2>/dev/null | grep -v '^#'; }
    total=$(report comm | awk '{s += $1} END {print s}')
    http=$(report comm | awk '$2 ~ /^MHD/ {s += $1} END {print s + 0}')
    page=$(report sym | awk '$3 ~ /^(page_step|page_forecasts|ring_of|watch_step)$/ {s += $1} END {print s + 0}')
    awk -v s=$s -v t="$total" -v h="$http" -v p="$page" 'BEGIN {
      printf "page_cost perf %s cpu-clock samples=%d page_code_on_the_step_loop=%d (%.3f%%) http_thread=%d (%.3f%%)\n", s, t, p, 100 * p / t, h, 100 * h / t
    }'
  done
fi
