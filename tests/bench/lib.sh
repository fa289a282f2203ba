# Shared by the benchmarks (source it, then set $lstream, or call
# bench_bins): a work directory, the embedded broker, and an EXIT trap that stops the broker and
# a trainer ($trainer_pid, when a script starts one in the background) and
# removes the directory.
work=$(mktemp -d)
broker_pid=
trainer_pid=
bench_cleanup() {
  [ -z "$trainer_pid" ] || kill -9 "$trainer_pid" 2>/dev/null || true
  [ -z "$broker_pid" ] || kill "$broker_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap bench_cleanup EXIT

# bench_bins [BUILD_DIR]: $lstream, BUILD_DIR/lstream (build/ by default;
# exits unless it is built), and $bins: it, then $BASELINE when set
# (another lstream binary run side by side with it).
bench_bins() {
  lstream="${1:-build}/lstream"
  [ -x "$lstream" ] || { echo "no $lstream: build first" >&2; exit 1; }
  bins=("$lstream")
  [ -z "${BASELINE:-}" ] || bins+=("$BASELINE")
}

# bench_median VALUES...: their median.
bench_median() {
  printf '%s\n' "$@" | sort -g |
    awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

# bench_broker [ARGS...]: starts `lstream broker ARGS` and sets $bootstrap
# once it has published its address; fails if the broker exits first or
# gives no address within 30 s. Its stderr goes to $work/broker.log.
bench_broker() {
  "$lstream" broker "$@" --bootstrap-file "$work/bootstrap" >/dev/null 2>"$work/broker.log" &
  broker_pid=$!
  local i
  for i in $(seq 300); do
    [ -s "$work/bootstrap" ] && break
    kill -0 "$broker_pid" 2>/dev/null || { cat "$work/broker.log" >&2; return 1; }
    sleep 0.1
  done
  [ -s "$work/bootstrap" ] || { echo "the broker gave no address in 30 s" >&2; return 1; }
  bootstrap=$(cat "$work/bootstrap")
}
