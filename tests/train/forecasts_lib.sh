# Shared by the forecasts' end-to-end tests (predict_test.sh, report_test.sh;
# sourced after lib.sh): a small trainer on a 4-partition topic src of sine
# series. One thread, a small shape: these tests check bits, not speed.
#   args           the trainer's command (args[2], its brokers, set by start)
#   start ARGS...  the embedded broker with topic src:4 and ARGS
#   produce ARGS.. the sine feed (2 features, seed 5) into src
args=(train --brokers BOOTSTRAP --topic src --features 2 --window 8 --batch 16 --hidden 16
  --lr 0.005 --quiet --threads 1)
start() {
  start_broker --topic src:4 "$@"
  args[2]=$bootstrap
}
produce() { "$lstream" produce --brokers "$bootstrap" --topic src --features 2 --generator sine \
  --noise 0.05 --seed 5 "$@" >/dev/null; }
