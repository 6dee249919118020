#!/usr/bin/env bash
# Configures and builds flashattn (Release, Ninja, ccache) into ./build.
# Extra arguments go to CMake's configure step, e.g. -DFLASHATTN_WITH_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build build --parallel "$(nproc)"
