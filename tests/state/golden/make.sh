#!/usr/bin/env bash
# Writes a golden snapshot set for the lstream it is given: a snapshot
# directory taken at step 12 of the golden replay (feed.sh), and the digests
# a resume of it must reach at step 24, recorded by that same lstream:
#   OUT/snapshots/       the snapshot directory (its newest snapshot: step 12)
#   OUT/digests          "resume_to=24 params=... states=..." and the version
# Run it once per snapshot format, with the version that writes that format,
# and commit OUT under tests/state/golden/ (a few tens of KB). resume_test.sh
# resumes every committed set with the lstream under test.
# GOLDEN_ARGS: more train options for the set's runs (such as --horizon 3
# --quantiles 0.1,0.5,0.9); they must be ones a resume takes from the
# snapshot (fixed settings), as resume_test.sh gives none.
# Usage: [GOLDEN_ARGS=...] make.sh LSTREAM OUT
set -euo pipefail
lstream=$(realpath "$1")
out=$2
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../train/lib.sh"
source "$here/feed.sh"
[ ! -e "$out" ] || fail "$out exists: a golden set is never overwritten"
start_broker --topic golden:3 --topic golden-forecasts:1
golden_feed
golden_train --snapshot-dir "$work/snaps" --snapshot-every 6 --max-steps 12 >"$work/first.out"
[ "$(field "$work/first.out" summary steps)" = 12 ] || { cat "$work/first.out"; fail "the first run did not take 12 steps"; }
# The digests of the resume, and of one uninterrupted run to the same step
# (equal, or the resume is broken in the version that writes the set).
cp -r "$work/snaps" "$work/resumed"
golden_train --snapshot-dir "$work/resumed" --max-steps 24 >"$work/resume.out"
golden_train --snapshot-dir "$work/straight" --max-steps 24 --predictions-topic golden-forecasts-2 >"$work/straight.out"
d_resume=$(sed -n 's/^digest //p' "$work/resume.out")
d_straight=$(sed -n 's/^digest //p' "$work/straight.out")
[ -n "$d_resume" ] && [ "$d_resume" = "$d_straight" ] ||
  fail "resumed ($d_resume) and uninterrupted ($d_straight) runs differ"
mkdir -p "$out"
cp -r "$work/snaps" "$out/snapshots"
rm -f "$out/snapshots/lock"
{
  echo "resume_to=24 $d_resume"
  [ -z "${GOLDEN_ARGS:-}" ] || echo "# options: $GOLDEN_ARGS"
  echo "# written by: $("$lstream" --version 2>/dev/null || echo lstream) (tree $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)) on $(date -u +%F)"
} >"$out/digests"
du -sh "$out"
cat "$out/digests"
