#!/usr/bin/env bash
# The quick start: installs what is missing, builds lstream, and runs the
# main job. Today that is the engine benchmark: full training steps of the
# CPU engine at the standard shapes, with the machine's sgemm rate.
set -euo pipefail
cd "$(dirname "$0")/.."
.ci/install-deps
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
./build/lstream bench engine
