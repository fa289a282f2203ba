#!/usr/bin/env bash
# What snapshots cost when most series are quiet: SERIES series of which
# ACTIVE send RECORDS records each and the others QUIET records (two
# windows of the default 16) and then nothing, all on one clock, replayed
# with `train --until end` at the default shape and options, without
# snapshots and with `--snapshot-every EVERY`, side by side over ROUNDS
# rounds (with BASELINE=PATH, another lstream binary, beside this build's).
# After the first few hundred steps only the ACTIVE series train, so a
# snapshot finds most series' model state as the one before wrote it
# (state/snapshot_model.c writes a series' rows once after they change).
# Prints per round and binary the run's wall and CPU seconds (user +
# system, every thread) with and without snapshots, the snapshots
# committed and skipped (a writer still busy when the next is due skips
# it) and the extra CPU a snapshot (the CPU with snapshots less without,
# over the snapshots committed); then the medians over rounds.
#
# Usage: tests/bench/snapshot_quiet.sh [BUILD_DIR]
#   env: ROUNDS (2) EVERY (10) SERIES (16384) ACTIVE (384) RECORDS (2049)
#        QUIET (17) BASELINE (none)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_bins "${1:-}"
ROUNDS=${ROUNDS:-2} EVERY=${EVERY:-10} SERIES=${SERIES:-16384} ACTIVE=${ACTIVE:-384}
RECORDS=${RECORDS:-2049} QUIET=${QUIET:-17}
bench_broker --topic quiet:16
/usr/bin/python3 - "$work/q.csv" "$SERIES" "$ACTIVE" "$RECORDS" "$QUIET" <<'PY'
import math, sys
path, series, active, records, quiet = sys.argv[1], *map(int, sys.argv[2:])
rows = []
for k in range(series):
    for t in range(records if k < active else quiet):
        rows.append((t, k))
rows.sort()
with open(path, "w") as f:
    for t, k in rows:
        f.write("k%06d,%d,%.5f,%.5f\n" % (k, 1704067200000 + 1000 * t, math.sin(t / 7 + k),
                                          math.cos(t / 11 + k)))
PY
"$lstream" produce --brokers "$bootstrap" --topic quiet --csv "$work/q.csv" >/dev/null


# run BIN SNAP: "wall cpu committed skipped" of one replay (SNAP: none or EVERY).
run() {
  local args=(train --brokers "$bootstrap" --topic quiet --features 2 --until end --quiet)
  rm -rf "$work/s"
  [ "$2" = none ] || args+=(--snapshot-dir "$work/s" --snapshot-every "$2" --resume none)
  /usr/bin/time -f "%e %U %S" -o "$work/time" "$1" "${args[@]}" >"$work/out" 2>&1 ||
    { cat "$work/out" >&2; exit 1; }
  local wall user sys c=0 k=0
  read -r wall user sys <"$work/time"
  read -r c k < <(sed -n 's/^snapshots committed=\([0-9]*\) skipped=\([0-9]*\).*/\1 \2/p' "$work/out") || true
  echo "$wall $(awk -v u="$user" -v s="$sys" 'BEGIN {print u + s}') ${c:-0} ${k:-0}"
}

declare -A per
for round in $(seq "$ROUNDS"); do
  for bin in "${bins[@]}"; do
    read -r w0 c0 _ _ < <(run "$bin" none)
    read -r w1 c1 n k < <(run "$bin" "$EVERY")
    per_snap=$(awk -v a="$c0" -v b="$c1" -v n="$n" 'BEGIN {printf "%.1f", 1000 * (b - a) / (n > 0 ? n : 1)}')
    echo "round $round bin=$bin wall none=$w0 every_$EVERY=$w1 cpu_s none=$c0 every_$EVERY=$c1" \
      "snapshots_committed/skipped=$n/$k cpu_ms_per_snapshot=$per_snap"
    per[$bin]="${per[$bin]:-} $per_snap"
    per["$bin,n"]="${per["$bin,n"]:-} $n"
  done
done
for bin in "${bins[@]}"; do
  # shellcheck disable=SC2086
  echo "snapshot_quiet bin=$bin rounds=$ROUNDS series=$SERIES active=$ACTIVE every=$EVERY" \
    "median_cpu_ms_per_snapshot=$(bench_median ${per[$bin]}) median_committed=$(bench_median ${per["$bin,n"]})"
done
