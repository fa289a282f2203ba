#!/usr/bin/env bash
# Packs what the GPU checks need for a machine that has a GPU, the CUDA
# toolkit and PyTorch but none of lstream's other dependencies (and no
# network to fetch them): the lstream program and test_cuda_engine from a
# build here, and every shared library they load that such a machine lacks
# (librdkafka, OpenBLAS, zstd, Open MPI's libraries, ...), and the CUDA
# runtime the build was linked against (libcudart, under 1 MB: the same
# minor version as the code). Left out: the C runtime (libc, libm,
# libstdc++, ...), which the machine has in a newer version, and cuBLAS and
# NCCL (opened at run time; 700+ MB), which tests/gpu/device_check.sh finds
# there. Binaries and libraries are stripped: the bundle travels with the
# working tree under the device machine's 64 MiB limit (its size is printed).
#
# Usage: tests/gpu/device_bundle.sh [BUILD_DIR] [BUNDLE_DIR]
#   BUILD_DIR   a Release build with the CUDA backend (default: build)
#   BUNDLE_DIR  where to put bin/ and lib/, and BUNDLE_DIR.tar.xz the same
#               in one archive (default: .device-bundle, which git ignores;
#               carry the archive to the GPU machine with the working tree)
# Then, on the GPU machine, from the repository root (README, "The GPU"):
#   tests/gpu/device_check.sh .device-bundle.tar.xz OUT_DIR check
#   tests/gpu/device_check.sh .device-bundle.tar.xz OUT_DIR bench
set -euo pipefail
build=${1:-build}
bundle=${2:-.device-bundle}
for f in lstream tests/gpu/test_cuda_engine; do
  [ -x "$build/$f" ] || { echo "no $build/$f: build first (the CUDA backend must be on)" >&2; exit 1; }
done
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"
cp "$build/lstream" "$build/tests/gpu/test_cuda_engine" "$bundle/bin/"

# Libraries the GPU machine brings itself.
skip='^(ld-linux.*|linux-vdso.*|libc|libm|libdl|libpthread|librt|libresolv|libstdc\+\+|libgcc_s|libcuda|libcublas|libcublasLt|libnccl|libnvidia-.*)\.so'
# (ldd finds libcudart through the build's run path.)
for exe in "$bundle"/bin/*; do
  ldd "$exe" | while read -r name _ path _; do
    [ -n "${path:-}" ] && [ "${path#/}" != "$path" ] || continue
    if echo "$name" | grep -Eq "$skip"; then continue; fi
    [ -e "$bundle/lib/$name" ] || cp -L "$path" "$bundle/lib/$name"
  done
done
strip --strip-unneeded "$bundle"/bin/* "$bundle"/lib/*
if ldd "$bundle"/bin/* | grep -q 'not found'; then
  ldd "$bundle"/bin/* | grep 'not found' >&2
  echo "device_bundle: some libraries were not found here" >&2
  exit 1
fi
# One archive to carry (xz: about a fifth of the folder, which OpenBLAS'
# 35 MB fills); device_check.sh takes either.
tar -C "$(dirname "$bundle")" -cJf "$bundle.tar.xz" "$(basename "$bundle")"
du -sh "$bundle" "$bundle.tar.xz"
ls "$bundle/lib"
