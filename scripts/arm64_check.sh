#!/usr/bin/env bash
# ARM64: cross-builds the library (CPU backends) and the GoogleTest suite for
# aarch64 Linux with Debian's cross compiler and runs the whole suite through
# qemu-user, in nproc shards. Installs g++-aarch64-linux-gnu and qemu-user when
# they are missing. CI runs it after the test command (.ci/run).
# Usage: bash scripts/arm64_check.sh [BUILD_DIR]   (default build-arm64)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-arm64}

# Without recommends: qemu-user-binfmt would register binfmt handlers, which a
# container may refuse; qemu-aarch64 is called directly.
# A machine whose package sources lack them skips the check, saying so (a failing
# build or test fails it).
if ! bash scripts/apt_install.sh --no-recommends arm64_check g++-aarch64-linux-gnu qemu-user libgtest-dev; then
  echo "arm64_check: SKIPPED, the cross compiler or qemu-user could not be installed"
  exit 0
fi

export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}" CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
cmake -S . -B "$build" -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake \
  -DFLASHATTN_WITH_CUDA=OFF -DFLASHATTN_BUILD_CLI=OFF -DFLASHATTN_BUILD_TESTS=ON >/dev/null
cmake --build "$build"

# The suite as on x86 (the CPU backend takes its portable kernels here; the
# x86-only levels skip), one shard per core: qemu runs one thread per core.
shards=$(nproc)
logs=$(mktemp -d)
pids=()
for ((i = 0; i < shards; i++)); do
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i OMP_NUM_THREADS=1 \
    qemu-aarch64 -L /usr/aarch64-linux-gnu "$build/tests/flashattn_tests" --gtest_brief=1 \
    > "$logs/shard$i.log" 2>&1 &
  pids+=($!)
done
status=0
for ((i = 0; i < shards; i++)); do
  wait "${pids[$i]}" || status=1
done
grep -h '^\[  FAILED  \]' "$logs"/shard*.log | sort -u || true
passed=$(grep -hoE '^\[  PASSED  \] [0-9]+' "$logs"/shard*.log | awk '{s += $4} END {print s + 0}')
skipped=$(grep -hoE '^\[  SKIPPED \] [0-9]+' "$logs"/shard*.log | awk '{s += $4} END {print s + 0}')
echo "arm64_check: aarch64 build, GoogleTest suite under qemu: $passed passed, $skipped skipped"
if [ $status -ne 0 ]; then
  tail -n 20 "$logs"/shard*.log
  exit 1
fi
