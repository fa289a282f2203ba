#!/usr/bin/env bash
# The quick start: installs what is missing, builds lstream, starts the
# embedded Kafka broker, writes a synthetic multi-series feed into it, and
# trains on it to the end of the topic, with the prequential loss beside the
# last-value baseline. Ends with the summary.
set -euo pipefail
cd "$(dirname "$0")/.."
.ci/install-deps
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
lstream=./build/lstream

work=$(mktemp -d)
broker_pid=
cleanup() {
  [ -n "$broker_pid" ] && kill "$broker_pid" 2>/dev/null && wait "$broker_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

echo "== an embedded Kafka broker with a topic of 8 partitions"
"$lstream" broker --topic ticks:8 --bootstrap-file "$work/bootstrap" >/dev/null &
broker_pid=$!
while [ ! -s "$work/bootstrap" ]; do sleep 0.1; done
bootstrap=$(cat "$work/bootstrap")
echo "bootstrap $bootstrap"

echo "== 128 series x 3000 ticks: sines of random period and phase, plus noise"
"$lstream" produce --brokers "$bootstrap" --topic ticks --series 128 --features 2 \
  --records-per-series 3000 --generator sine --noise 0.02 --seed 1

echo "== training (replay to the end of the topic, carrying each series' state)"
"$lstream" train --brokers "$bootstrap" --topic ticks --features 2 --window 16 --batch 64 \
  --hidden 64 --lr 0.005 --until end
