#!/usr/bin/env bash
# The lean CI test of the real-data acceptance (ctest: realdata_acceptance):
# two Debian-shipped data sets, raw, default options, one seed, checked
# against issue 24's acceptance on lstream's per-target figures in data
# units (run.py --check):
#   eustock   R's EuStockMarkets, 4 series x 1,860 daily closes (prices):
#             final MSE at most 1.005x the last value's
#   weather   vega's Seattle weather, 1,461 days, two targets (max and min
#             temperature): at most 1.00x the best of last value, seasonal
#             naive, AR(p), AR with seasonal lags and Holt-Winters
#   ukgas, seatfront, ukdriver  R's UKgas, Seatbelts' front, UKDriverDeaths
#             (the wider holdout's seasonal sets), seeds 1-3: the median
#             at most 3x (ukgas: datasets.GUARDS) or 1.15x the best
# Time: about 15 s in all (2 cores): lstream, the baselines (statsmodels'
# Holt-Winters) and R.
# Usage: ci_sketch.sh [BUILD_DIR]; prints "N passed, M failed", exit 1 on a miss.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
timeout 300 /usr/bin/python3 "$here/run.py" "${1:-build}" --sets eustock,weather --check
# and the wider holdout's seasonal sets (R, 108-192 points), three seeds'
# median: ukgas held to its guard (datasets.GUARDS: 3x, where the
# overshoot of FINDINGS 19 took it to 7.7x), the monthly two to 1.15x
exec timeout 300 /usr/bin/python3 "$here/run.py" "${1:-build}" --sets ukgas,seatfront,ukdriver \
  --seeds 1,2,3 --check
