#!/usr/bin/env bash
# The promise that every snapshot written since format 4 resumes in every
# later version: each committed golden set (tests/state/golden/v*/, written
# by make.sh with the version of its name) is resumed by the lstream under
# test on the same replay (feed.sh), which must reach the digests recorded
# with it. A change that alters training on purpose records the new digests
# in a line "resume_to=24 ... # since: WHY" below the old one (the last line
# that starts with resume_to= is the one checked), never by rewriting a set.
# Usage: resume_test.sh LSTREAM
set -euo pipefail
lstream=$1
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../train/lib.sh"
source "$here/feed.sh"
sets=("$here"/v*/)
[ -d "${sets[0]}" ] || fail "no golden set under $here"
for set in "${sets[@]}"; do
  name=$(basename "$set")
  want=$(grep '^resume_to=' "$set/digests" | tail -n 1)
  to=$(echo "$want" | sed -n 's/^resume_to=\([0-9]*\) .*/\1/p')
  want_d=$(echo "$want" | sed -n 's/^resume_to=[0-9]* \(params=[0-9a-f]* states=[0-9a-f]*\).*/\1/p')
  [ -n "$to" ] && [ -n "$want_d" ] || fail "$name: no resume_to line in $set/digests"
  # A fresh broker per set: the resume reads on from the snapshot's offsets.
  [ -z "$broker_pid" ] || { kill "$broker_pid"; wait "$broker_pid" 2>/dev/null || true; rm -f "$work/bootstrap"; }
  start_broker --topic golden:3 --topic golden-forecasts:1
  golden_feed
  rm -rf "$work/$name" && cp -r "$set/snapshots" "$work/$name"
  golden_train --snapshot-dir "$work/$name" --max-steps "$to" >"$work/$name.out" 2>"$work/$name.err" ||
    { cat "$work/$name.err"; fail "$name: the resume exited $?"; }
  grep -q "resumed from .*snap-" "$work/$name.err" || { cat "$work/$name.err"; fail "$name: did not resume"; }
  got=$(sed -n 's/^digest //p' "$work/$name.out")
  [ "$got" = "$want_d" ] || { cat "$work/$name.err" "$work/$name.out"; fail "$name: resumed to step $to with $got, recorded $want_d"; }
  echo "ok: $name resumes to step $to with $got"
done
echo PASS
