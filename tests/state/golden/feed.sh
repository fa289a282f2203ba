# The golden snapshots' feed and training command (sourced by make.sh and
# resume_test.sh, after tests/train/lib.sh): the same records on any broker,
# the same options in every version. Changing anything here changes what the
# committed snapshots resume into: add a new golden set instead.
#   golden_feed          a topic `golden` of 3 partitions, 6 series x 150
#                        records of 2 features (sine), produced into $bootstrap
#   golden_train ARGS... `lstream train` on it, one thread (the same sums on
#                        any machine), forecasts going out to a topic (every
#                        section of a snapshot is written), ARGS appended
golden_feed() {
  "$lstream" produce --brokers "$bootstrap" --topic golden --series 6 --features 2 \
    --records-per-series 150 --generator sine --noise 0.05 --seed 7 >/dev/null
}
golden_train() {
  "$lstream" train --brokers "$bootstrap" --topic golden --features 2 --window 8 --batch 4 \
    --hidden 8 --layers 1 --lr 0.01 --threads 1 --until end \
    --predictions-topic golden-forecasts --quiet ${GOLDEN_ARGS:-} "$@"
}
