#!/usr/bin/env bash
# The real-data benchmark of lstream (issue 17): run.sh [BUILD_DIR] [run.py options].
# Starts `lstream broker`, writes each data set with a real Kafka client,
# trains with default options and prints lstream beside last value, seasonal
# naive and AR(p). Details in run.py; the data sets in datasets.py.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
[ $# -gt 0 ] && shift
exec /usr/bin/python3 "$here/run.py" "$build" "$@"
