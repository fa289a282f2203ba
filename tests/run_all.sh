#!/usr/bin/env bash
# Builds lstream and runs every test: the normal build with warnings as
# errors, then the same suite under AddressSanitizer + UBSan. Installs what
# is missing first: Debian's packages (.ci/install-deps), the CUDA
# toolkit from PyPI's NVIDIA wheels (.ci/install-cuda) and the Apache Kafka
# broker of the real-broker tests from Maven Central (.ci/install-kafka).
# Usage: tests/run_all.sh        (from anywhere; builds in build/ and build-asan/)
set -euo pipefail
cd "$(dirname "$0")/.."
.ci/install-deps
# The CUDA toolkit (no GPU needed: the CUDA code is compiled, linked and run
# on the emulation); its folders go to CMake, never guessed there.
roots=$(.ci/install-cuda --print-root)
read -r cuda_root nccl_root <<<"$roots"
export NCCL_ROOT=$nccl_root
cuda=(-DCUDAToolkit_ROOT="$cuda_root" -DLSTREAM_CUDA_REQUIRED=ON)
# Apache Kafka's jars (tests/kafka: the ctest fixtures start the broker).
kafka=(-DLSTREAM_KAFKA_HOME="$(.ci/install-kafka --print-home)" -DLSTREAM_KAFKA_REQUIRED=ON)
# One test more than cores: most end-to-end tests wait on brokers, timeouts
# and other processes for much of their time (at -j2 on 2 cores the CPU
# idled ~40% of the suite). Still at most two end-to-end tests and one
# real-Kafka test at a time (their locks: tests/CMakeLists.txt).
cores=$(nproc)
jobs=$((cores + 1))

echo "== build (Release, -Werror) (at ${SECONDS} s) =="
# jemalloc required: without it the program would build on the system's
# malloc and the allocator test would pass on that (train/cli/allocator.c).
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DLSTREAM_WERROR=ON -DLSTREAM_MALLOC=jemalloc \
  "${cuda[@]}" "${kafka[@]}"
cmake --build build -j"$cores"
echo "== tests (at ${SECONDS} s) =="
# emu_train_one (train --device cuda on the emulation against the CPU, ~1
# min here) runs in the sanitizer pass only: the same checks, and its
# memory's besides.
ctest --test-dir build --output-on-failure -j"$jobs" -E '^emu_train_one$'

echo "== build (ASan + UBSan, -Werror) (at ${SECONDS} s) =="
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLSTREAM_WERROR=ON -DLSTREAM_SANITIZE=ON \
  "${cuda[@]}" "${kafka[@]}"
cmake --build build-asan -j"$cores"
echo "== tests under sanitizers (at ${SECONDS} s) =="
# The real-broker tests (label kafka: Apache Kafka's JVMs, ~2 min) run in the
# normal suite only: the library code they drive is the code the embedded
# broker's end-to-end tests drive here.
ctest --test-dir build-asan --output-on-failure -j"$jobs" -LE kafka
echo "== done in $((SECONDS / 60)) min $((SECONDS % 60)) s =="
