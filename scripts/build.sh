#!/usr/bin/env bash
# Configures and builds flashattn (Release, Ninja, ccache) into ./build.
# Extra arguments go to CMake's configure step, e.g. -DFLASHATTN_WITH_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache: share hits between checkouts in different folders (CI clones elsewhere).
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build build --parallel "$(nproc)"
