#!/usr/bin/env bash
# Seeds for fuzz_snapshot_read: the manifest and shards of a 2-rank snapshot
# made by snapshot_dump, each with the mode byte of its kind, checksums
# verified and skipped (see fuzz_snapshot_read.c).
# Usage: tests/fuzz/snapshot_seeds.sh PATH/snapshot_dump CORPUS_DIR
set -euo pipefail
dump=$1 corpus=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$dump" --dir "$tmp/snaps" --out "$tmp/expect" --world 2
snap=$(ls -d "$tmp"/snaps/snap-*)
mkdir -p "$corpus"
for f in manifest shard-0 shard-1; do
  kind=$([ "$f" = manifest ] && echo 1 || echo 0)
  for skip in 0 2; do
    { printf "\\x$(printf %02x $((kind | skip)))"; cat "$snap/$f"; } > "$corpus/seed-$f-$skip"
  done
done
echo "snapshot_seeds: $(ls "$corpus" | wc -l) files in $corpus"
