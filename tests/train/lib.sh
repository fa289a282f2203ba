# Shared by the end-to-end test scripts in tests/train (sourced, not run):
# a work directory removed on exit, an embedded broker stopped on exit (and
# any trainer still attached to it), and small helpers.
#   fail MSG                 print FAIL: MSG and exit 1
#   start_broker ARGS...     `lstream broker ARGS` in the background; sets $bootstrap
#   field FILE PREFIX KEY    the value of KEY= on the line of FILE starting with PREFIX
#   run NAME CMD ARGS...     a complete run of CMD, its output in $work/NAME.out and
#                            .err; fails, printing the .err, unless it exits 0
#   wait_step PID STEP [METRICS]  waits (up to 120 s) until trainer PID, writing
#                            --metrics METRICS ($work/metrics), printed a step >= STEP;
#                            returns 1 if it exits first or never does
#   wait_for WHAT SECONDS COMMAND...  polls COMMAND every 0.1 s until it succeeds,
#                            failing with WHAT after SECONDS
#   mpi_env                  environment for mpirun tests (root, oversubscription, LSan)
#   kill_trainer             SIGKILL the trainers on $bootstrap; fails if there was none
#                            (a test may redefine it: one rank of an mpirun job)
#   kill_at POINT LAUNCH...  runs trainer LAUNCH (--metrics $work/metrics added; output in
#                            $work/k.out, .err) and kills it (kill_trainer) where POINT is:
#                            a step number, or "write" (needs $stopper: stop_at.so); fails
#                            if the run ends first
# Needs $lstream set before it is sourced.
work=$(mktemp -d)
broker_pid=
bootstrap=none
cleanup() {
  pkill -9 -f "lstream train --brokers $bootstrap" 2>/dev/null || true
  [ -n "$broker_pid" ] && kill "$broker_pid" 2>/dev/null && wait "$broker_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

start_broker() {
  "$lstream" broker "$@" --bootstrap-file "$work/bootstrap" >/dev/null 2>&1 &
  broker_pid=$!
  for _ in $(seq 200); do [ -s "$work/bootstrap" ] && break; sleep 0.05; done
  [ -s "$work/bootstrap" ] || fail "the broker did not start"
  bootstrap=$(cat "$work/bootstrap")
}

field() { sed -n "s/^$2 .*\b$3=\([^ ]*\).*/\1/p" "$1"; }

run() {
  local name=$1 rc=0
  shift
  "$@" >"$work/$name.out" 2>"$work/$name.err" || rc=$?
  [ $rc = 0 ] || { cat "$work/$name.err" >&2; fail "$name exited $rc"; }
}

wait_step() {
  local step
  for _ in $(seq 2400); do
    step=$(tail -n 1 "${3:-$work/metrics}" 2>/dev/null | sed -n 's/^{"step":\([0-9]*\),.*/\1/p' || true)
    [ -n "$step" ] && [ "$step" -ge "$2" ] && return 0
    kill -0 "$1" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

wait_for() {
  local what=$1 limit=$2
  shift 2
  local deadline=$((SECONDS + limit))
  until "$@"; do
    [ $SECONDS -lt $deadline ] || fail "waited ${limit} s for $what"
    sleep 0.1
  done
}

mpi_env() {
  # CI and these machines run as root; ranks outnumber cores.
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_MCA_rmaps_base_oversubscribe=1
  # In the sanitizer build: Open MPI keeps allocations past MPI_Finalize (in
  # plugins it has unloaded, so they cannot be suppressed by name). Leak
  # checks are off for the ranks only; ASan's memory errors and UBSan stay
  # on, and the single-process train tests check the same code for leaks.
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
}

kill_trainer() { pkill -9 -f "lstream train --brokers $bootstrap"; }

# kill_at: the trainer stops itself where the point is ($stopper,
# stop_at.c, preloaded), so the kill lands there however fast or loaded the
# machine (a poll for the point, as before, missed a snapshot write of a few
# ms now and then, and a short run could end before the poll saw its step):
# a step number: as it begins that step's metrics line (that step done, the
# next not begun); "write": half way through writing a snapshot.
kill_at() {
  local point=$1 trainers="lstream train --brokers $bootstrap" pid rc=0
  shift
  [ -f "${stopper:-}" ] || fail "no stop_at library given: '${stopper:-}'"
  rm -f "$work/metrics"
  # (ASan wants its runtime first among the libraries: it is, in the trainer's own list)
  env LD_PRELOAD="$stopper" LSTREAM_STOP_AT="$point" \
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
    "$@" --metrics "$work/metrics" >"$work/k.out" 2>"$work/k.err" &
  pid=$!
  until pgrep -r T -f "$trainers" >/dev/null; do
    kill -0 $pid 2>/dev/null && sleep 0.01 && continue
    wait $pid || rc=$?
    cat "$work/k.err" >&2
    fail "the run ended (exit $rc) before point $point"
  done
  kill_trainer || fail "no trainer to kill at point $point"
  pkill -CONT -f "$trainers" || true # the rest of an mpirun job let go to end
  wait $pid 2>/dev/null || true
}
