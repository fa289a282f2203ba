#!/usr/bin/env bash
# Where `lstream train` spends its cycles, by perf: the share in the engine
# (the CPU backend's kernels, kernels/, and OpenBLAS), in the seasons and
# the linear path (train/season*.c), and elsewhere (reading, windows,
# preparation, the kernel). A replay with --replay 0 (one update a step, what
# `lstream bench engine` measures) at B=256 F=8 H=128 L=2 T=32 by default.
# The engine's share is what `train` reaches of the engine's raw step rate
# when the engine runs inside it as fast as alone (issue 30 item 4: the
# target is 0.9); shares of samples are a property of the program, so other
# work on a shared machine moves them far less than it moves wall time.
#
# Usage: tests/bench/train_cycles.sh [BUILD_DIR...]
#   each BUILD_DIR a build holding lstream and its object files (default:
#   build); several are measured one after the other on the same topic.
#   env: B (256) F (8) H (128) L (2) T (32) SERIES (1024) RECORDS (513)
#        ROUNDS (3: medians), TOP (12: the hottest symbols printed)
# Needs perf (linux-perf) and the permission to record (root, or
# kernel.perf_event_paranoid <= 1). Not part of CI.
set -euo pipefail
builds=("${@:-build}")
for b in "${builds[@]}"; do
  [ -x "$b/lstream" ] || { echo "no $b/lstream: build first" >&2; exit 1; }
done
command -v perf >/dev/null || { echo "perf not found: apt-get install linux-perf" >&2; exit 1; }
B=${B:-256} F=${F:-8} H=${H:-128} L=${L:-2} T=${T:-32}
SERIES=${SERIES:-1024} RECORDS=${RECORDS:-513} ROUNDS=${ROUNDS:-3} TOP=${TOP:-12}
lstream="${builds[0]}/lstream"
. "$(dirname "$0")/lib.sh"
bench_broker --topic bench:16
"$lstream" produce --brokers "$bootstrap" --topic bench --series "$SERIES" --features "$F" \
  --records-per-series "$RECORDS" --generator sine --seed 1 >/dev/null 2>&1

# The functions of a set of object files, by name: a clone's suffix
# (name.avx2.1 in the object, name.avx2 in perf's report) left out.
symbols_of() { find "$@" -name '*.o' -exec nm --defined-only {} + 2>/dev/null |
  awk '$2 ~ /^[tTi]$/ {n = $3; sub(/\..*$/, "", n); print n}' | sort -u; }
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}'; }

echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), $(date -u +%F)," \
  "load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "train --replay 0: B=$B F=$F H=$H L=$L T=$T, $SERIES series x $RECORDS records; medians of $ROUNDS rounds"
for b in "${builds[@]}"; do
  symbols_of "$b/kernels" >"$work/engine.syms"
  symbols_of "$b/train" -name 'season*' >"$work/season.syms"
  shares=()
  for r in $(seq "$ROUNDS"); do
    perf record -q -F 999 -o "$work/perf.data" -- "$b/lstream" train --brokers "$bootstrap" \
      --topic bench --features "$F" --window "$T" --batch "$B" --hidden "$H" --layers "$L" \
      --until end --quiet --replay 0 >"$work/train.out" 2>/dev/null
    perf report -i "$work/perf.data" --no-children --sort dso,symbol --stdio 2>/dev/null |
      awk -v E="$work/engine.syms" -v S="$work/season.syms" -v top="$TOP" -v out="$work/top.$r" '
        BEGIN { while ((getline s < E) > 0) eng[s] = 1; while ((getline s < S) > 0) sea[s] = 1 }
        /^ *[0-9.]+%/ {
          p = $1; sub(/%/, "", p); dso = $2; sym = "?"
          for (i = 3; i < NF; i++) if ($i == "[.]" || $i == "[k]") { sym = $(i + 1); break }
          base = sym; sub(/\..*$/, "", base)
          kind = dso ~ /openblas/ || (base in eng) ? "engine" : (base in sea) ? "season" : "other"
          share[kind] += p
          if (n++ < top) printf "  %6.2f%%  %-7s %s\n", p, kind, sym > out
        }
        END { printf "%.2f %.2f %.2f\n", share["engine"], share["season"], share["other"] }'
  done >"$work/shares"
  rate=$(sed -n 's/^summary.* windows_per_s=\([0-9.]*\).*/\1/p' "$work/train.out")
  e=$(cut -d' ' -f1 "$work/shares" | median)
  s=$(cut -d' ' -f2 "$work/shares" | median)
  o=$(cut -d' ' -f3 "$work/shares" | median)
  echo "$b ($(git -C "$b" rev-parse --short HEAD 2>/dev/null || echo '?')):" \
    "engine ${e}% season ${s}% other ${o}% of the samples (last run: $rate windows/s)"
  cat "$work/top.$ROUNDS"
done
