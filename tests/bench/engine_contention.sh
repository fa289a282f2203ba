#!/usr/bin/env bash
# A training step under a competing load: one process spinning on a core,
# the engine on both (issue 30, item 3). Side by side, builds A and B (e.g.
# main before and after a change) and, with ADAPT, settings of the CPU
# pool's adaptation (LSTREAM_CPU_ADAPT), in rounds that alternate: for each
# shape, `lstream bench engine` at 1 thread with the machine quiet, at 2
# threads quiet, and at 1 and 2 threads with a busy-loop process running
# (not pinned: the scheduler places it as it would another user's job).
# Prints the medians and the ratio loaded-2-threads / quiet-1-thread, also
# as the median of each round's own ratio (at most 1 means a busy core no
# longer holds the step past what one thread alone takes; loaded_1t is
# the floor the load leaves one thread).
#
# Usage: tests/bench/engine_contention.sh BUILD_A [BUILD_B] [ROUNDS] [STEPS]
#   BUILD_A, BUILD_B  build directories holding lstream (B optional)
#   ROUNDS            alternations (default 5)
#   STEPS             timed steps per run (default 10; each run a median)
# Environment: SHAPES (B,I,H,L,T list; default the three below); ADAPT (the
# LSTREAM_CPU_ADAPT values to run each build with, default "1": e.g. "0 1").
# Not part of CI: it takes minutes and wants an otherwise quiet machine.
set -euo pipefail
builds=("$1")
shift
if [ $# -gt 0 ] && [ -x "$1/lstream" ]; then
  builds+=("$1")
  shift
fi
rounds=${1:-5}
steps=${2:-10}
for b in "${builds[@]}"; do
  [ -x "$b/lstream" ] || { echo "no $b/lstream: build first" >&2; exit 1; }
done
# The variants: each build with each ADAPT setting.
names=() dirs=() adapts=()
letters=(A B)
for i in "${!builds[@]}"; do
  for a in ${ADAPT:-1}; do
    names+=("${letters[$i]}/adapt=$a") dirs+=("${builds[$i]}") adapts+=("$a")
  done
done
shapes=${SHAPES:-"64,4,64,1,64 256,8,128,2,32 1024,16,256,2,64"}
spinner=
cleanup() { [ -z "$spinner" ] || kill "$spinner" 2>/dev/null || true; }
trap cleanup EXIT

field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
step_ms() { # VARIANT THREADS SHAPE
  LSTREAM_CPU_ADAPT="${adapts[$1]}" "${dirs[$1]}/lstream" bench engine --no-sgemm --threads "$2" \
    --steps "$steps" --warmup 3 --shape "$3" | grep '^engine' | field ms_per_step
}
loaded() { # VARIANT THREADS SHAPE: step_ms beside a busy loop
  (while :; do :; done) &
  spinner=$!
  step_ms "$@"
  kill "$spinner"
  wait "$spinner" 2>/dev/null || true
  spinner=
}

echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), $(date -u +%F)," \
  "load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-18s %-14s %10s %10s %10s %10s %10s %12s\n' "B,I,H,L,T" "variant" "quiet_1t" \
  "quiet_2t" "loaded_1t" "loaded_2t" "loaded/1t" "per round"
for s in $shapes; do
  declare -A q1=() q2=() l1=() l2=() per=()
  for _ in $(seq "$rounds"); do
    for i in "${!names[@]}"; do
      a=$(step_ms "$i" 1 "$s") b=$(step_ms "$i" 2 "$s")
      c=$(loaded "$i" 1 "$s") d=$(loaded "$i" 2 "$s")
      q1[$i]+="$a " q2[$i]+="$b " l1[$i]+="$c " l2[$i]+="$d "
      per[$i]+="$(awk -v a="$a" -v d="$d" 'BEGIN {print d / a}') "
    done
  done
  for i in "${!names[@]}"; do
    a=$(printf '%s\n' ${q1[$i]} | median)
    b=$(printf '%s\n' ${q2[$i]} | median)
    c=$(printf '%s\n' ${l1[$i]} | median)
    d=$(printf '%s\n' ${l2[$i]} | median)
    r=$(printf '%s\n' ${per[$i]} | median)
    printf '%-18s %-14s %10.3f %10.3f %10.3f %10.3f %10.2f %12.2f\n' "$s" "${names[$i]}" \
      "$a" "$b" "$c" "$d" "$(awk -v a="$a" -v d="$d" 'BEGIN {print d / a}')" "$r"
  done
  unset q1 q2 l1 l2 per
done
for i in "${!builds[@]}"; do
  echo "${letters[$i]}: ${builds[$i]} ($(git -C "${builds[$i]}" rev-parse --short HEAD 2>/dev/null || echo '?'))"
done
echo "ms per step, medians of $rounds rounds of $steps steps; loaded: one busy-loop process beside;" \
  "per round: the median of each round's loaded_2t / quiet_1t."
