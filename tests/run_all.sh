#!/usr/bin/env bash
# Builds lstream and runs every test: the normal build with warnings as
# errors, then the same suite under AddressSanitizer + UBSan.
# Usage: tests/run_all.sh        (from anywhere; builds in build/ and build-asan/)
set -euo pipefail
cd "$(dirname "$0")/.."
.ci/install-deps
jobs=$(nproc)

echo "== build (Release, -Werror) =="
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DLSTREAM_WERROR=ON
cmake --build build -j"$jobs"
echo "== tests =="
ctest --test-dir build --output-on-failure -j"$jobs"

echo "== build (ASan + UBSan, -Werror) =="
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLSTREAM_WERROR=ON -DLSTREAM_SANITIZE=ON
cmake --build build-asan -j"$jobs"
echo "== tests under sanitizers =="
ctest --test-dir build-asan --output-on-failure -j"$jobs"
