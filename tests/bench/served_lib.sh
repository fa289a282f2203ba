# Shared by http_overhead.sh and page_cost.sh (sourced, with $build set):
# the replay they time with and without --http, on the embedded broker.
#   args      the trainer's command (a replay of SERIES x RECORDS records,
#             shape B F H L T, THREADS threads; the env gives them)
#   port      a free port for --http
#   figures OUT TIME   "windows/s CPU-seconds-per-1000-windows" of a run's
#             output and its /usr/bin/time file ('%U %S')
#   median V...        the median of numbers
lstream="$build/lstream"
[ -x "$lstream" ] || { echo "no $lstream: build first" >&2; exit 1; }
ROUNDS=${ROUNDS:-5} THREADS=${THREADS:-1} B=${B:-64} F=${F:-4} H=${H:-64} L=${L:-1} T=${T:-32}
SERIES=${SERIES:-512} RECORDS=${RECORDS:-4097}
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_broker --topic bench:16
"$lstream" produce --brokers "$bootstrap" --topic bench --series "$SERIES" --features "$F" \
  --records-per-series "$RECORDS" --generator sine --seed 1 2>/dev/null
args=(train --brokers "$bootstrap" --topic bench --features "$F" --window "$T" --batch "$B"
  --hidden "$H" --layers "$L" --threads "$THREADS" --until end --quiet)
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

figures() {
  local w
  w=$(sed -n 's/^summary.* windows=\([0-9]*\) .*/\1/p' "$1")
  awk -v w="$w" -v wps="$(sed -n 's/^summary.* windows_per_s=\([0-9.]*\).*/\1/p' "$1")" \
    '{printf "%s %.4f\n", wps, ($1 + $2) / w * 1000}' "$2"
}

median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
