#!/usr/bin/env bash
# What serving /metrics costs the step loop: the same replay with and
# without --http, the served one scraped every second (/metrics and /health,
# as Prometheus and an orchestrator would), alternating, ROUNDS rounds; the
# medians of windows/s (wall clock) and of the process's CPU seconds per
# 1000 windows (user + sys: less at the mercy of other jobs on a shared
# machine than the wall clock), the costs, and the median time of a scrape.
# Then, where perf can sample (PERF=0 skips it), one served run under
# `perf record -e cpu-clock`: the share of the process's CPU samples spent
# in the HTTP thread and in the monitor's code on the step loop, a figure
# other jobs on the machine hardly move.
#
# Usage: tests/bench/http_overhead.sh [BUILD_DIR]
#   env: ROUNDS (5) THREADS (1) B (64) F (4) H (64) L (1) T (32) SERIES (512)
#        RECORDS (4097)
set -euo pipefail
build=${1:-build}
. "$(dirname "$0")/served_lib.sh"

# A run with --http and a scraper every second.
served() {
  /usr/bin/time -o "$work/served.time" -f '%U %S' "$lstream" "${args[@]}" \
    --http "127.0.0.1:$port" >"$work/served.out" &
  local pid=$! scrapes=0
  while kill -0 $pid 2>/dev/null; do
    if curl -sf --max-time 2 "http://127.0.0.1:$port/metrics" -o /dev/null \
      -w '%{time_total}\n' >>"$work/scrape_times" &&
      curl -s --max-time 2 "http://127.0.0.1:$port/health" -o /dev/null; then
      scrapes=$((scrapes + 1))
    fi
    sleep 1
  done
  wait $pid
  echo "$scrapes" >"$work/scrapes"
  figures "$work/served.out" "$work/served.time"
}

plain() {
  /usr/bin/time -o "$work/plain.time" -f '%U %S' "$lstream" "${args[@]}" >"$work/plain.out"
  figures "$work/plain.out" "$work/plain.time"
}

w0=() w1=() c0=() c1=()
for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) -eq 1 ]; then
    a=$(plain) b=$(served)
  else
    b=$(served) a=$(plain)
  fi
  w0+=("${a% *}") c0+=("${a#* }") w1+=("${b% *}") c1+=("${b#* }")
  echo "round $r: windows_per_s without=${a% *} with=${b% *}" \
    "cpu_s_per_1000_windows without=${a#* } with=${b#* } scrapes=$(cat "$work/scrapes")"
done
awk -v a="$(median "${w0[@]}")" -v b="$(median "${w1[@]}")" -v ca="$(median "${c0[@]}")" \
  -v cb="$(median "${c1[@]}")" -v s="$(median $(cat "$work/scrape_times"))" -v r="$ROUNDS" \
  -v shape="B=$B F=$F H=$H L=$L T=$T threads=$THREADS" 'BEGIN {
  printf "http_overhead %s rounds=%d median_windows_per_s without=%.1f with=%.1f cost=%.2f%%\n", shape, r, a, b, (a / b - 1) * 100
  printf "http_overhead median_cpu_s_per_1000_windows without=%.4f with=%.4f cost=%.2f%% median_scrape_ms=%.2f\n", ca, cb, (cb / ca - 1) * 100, s * 1000
}'

# The serving code's share of CPU samples in one served run.
if [ "${PERF:-1}" != 0 ] && command -v perf >/dev/null &&
  perf record -q -e cpu-clock -o "$work/probe.data" true >/dev/null 2>&1; then
  perf record -q -e cpu-clock -F 2000 -o "$work/perf.data" -- "$lstream" "${args[@]}" \
    --http "127.0.0.1:$port" >/dev/null 2>&1 &
  pid=$!
  while kill -0 $pid 2>/dev/null; do
    curl -s --max-time 2 "http://127.0.0.1:$port/metrics" -o /dev/null || true
    curl -s --max-time 2 "http://127.0.0.1:$port/health" -o /dev/null || true
    sleep 1
  done
  wait $pid
  report() { perf report -i "$work/perf.data" --percent-limit 0 --sort "$1" -F "sample,$1" 2>/dev/null | grep -v '^#'; }
  total=$(report comm | awk '{s += $1} END {print s}')
  http=$(report comm | awk '$2 ~ /^MHD/ {s += $1} END {print s + 0}')
  monitor=$(report sym | awk '$3 ~ /^(monitor_|account$|publish$|tb_|total_lag$|live_sample$|render$|health_|metric_samples$|sample$|value_at$|on_request$|answer)/ {s += $1} END {print s + 0}')
  awk -v t="$total" -v h="$http" -v m="$monitor" 'BEGIN {
    printf "http_overhead perf cpu-clock samples=%d http_thread=%d (%.3f%%) monitor_code=%d (%.3f%%)\n", t, h, 100 * h / t, m, 100 * m / t
  }'
fi
