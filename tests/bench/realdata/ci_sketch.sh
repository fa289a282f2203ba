#!/usr/bin/env bash
# The lean CI test of issue 17 (ctest: realdata_acceptance): two
# Debian-shipped data sets, raw, default options, checked against the
# acceptance ratios on lstream's per-target figures in data units.
#   eustock   R's EuStockMarkets, 4 series x 1,860 daily closes: final MSE at
#             most 1.05x last value and 1.15x AR(p)
#   treering  R's treering, 1 series x 7,980: AR(p) beats last value by ~40%,
#             so at most 0.9x last value and 1.15x AR(p)
# Time: about 4 s in all (2 cores): lstream, the baselines and R.
# Usage: ci_sketch.sh [BUILD_DIR]; prints "N passed, M failed", exit 1 on a miss.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec timeout 120 /usr/bin/python3 "$here/run.py" "${1:-build}" --sets eustock,treering --check
