#!/usr/bin/env bash
# Produce-to-forecast latency live (`lstream bench live`) with and without
# the serving thread (--serve-thread true / false), and against another
# build (BUILD_B, e.g. one from before the thread: run without the option),
# alternating set-ups in each of ROUNDS rounds; per set-up and shape the
# medians over rounds of p50, p99 and max (ms), and of the forecasts made
# while a step ran.
#
# Shapes (SHAPES, "label:options;..."): the trainer's default model at 100
# series x 1,000 records/s on 1 and 2 threads; a model whose steps take
# tens of ms (hidden 256); 10,000 series x 2,000 records/s (its records of
# the first 8 s, while series are still new, left out).
#
# Usage: tests/bench/serve_latency.sh BUILD_A [BUILD_B] [ROUNDS]
set -euo pipefail
a=${1:?usage: serve_latency.sh BUILD_A [BUILD_B] [ROUNDS]}
b=${2:-}
rounds=${3:-3}
shapes=${SHAPES:-"h64t1:--seconds 10;h64t2:--seconds 10 --threads 2;h256:--seconds 10 --hidden 256;s10k:--series 10000 --rate 2000 --seconds 20 --warmup 8"}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

setups=("A-thread|$a/lstream|--serve-thread true" "A-nothread|$a/lstream|--serve-thread false")
[ -n "$b" ] && setups+=("B|$b/lstream|")
echo "# $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'); rounds $rounds"
IFS=';' read -ra list <<<"$shapes"
for r in $(seq "$rounds"); do
  for sh in "${list[@]}"; do
    label=${sh%%:*} opts=${sh#*:}
    for s in "${setups[@]}"; do
      IFS='|' read -r name bin extra <<<"$s"
      # shellcheck disable=SC2086
      line=$("$bin" bench live $opts $extra 2>/dev/null | tail -1) || line=failed
      echo "$r $label $name $line" | tee -a "$work/all"
    done
  done
done
echo
echo "| shape | set-up | p50 ms | p99 ms | max ms | during_steps |"
echo "|---|---|---|---|---|---|"
/usr/bin/python3 - "$work/all" <<'EOF'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 4 or f[3] != 'live':
        continue
    kv = dict(re.findall(r'(\w+)=([0-9.]+)', line))
    rows.setdefault((f[1], f[2]), []).append(kv)
for (shape, name), runs in rows.items():
    med = lambda k: statistics.median(float(r.get(k, 'nan')) for r in runs)
    print(f"| {shape} | {name} | {med('p50_ms'):.2f} | {med('p99_ms'):.2f} | "
          f"{med('max_ms'):.2f} | {med('during_steps'):.0f} |")
EOF
