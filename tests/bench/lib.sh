# Shared by the benchmarks (source it after setting $lstream): a work
# directory, the embedded broker, and an EXIT trap that stops the broker and
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
