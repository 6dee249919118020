#!/usr/bin/env bash
# The host code under AddressSanitizer and UndefinedBehaviorSanitizer: the
# library, the CLI and the GoogleTest suite built CPU-only with
# -fsanitize=address,undefined into build-sanitize, then every CTest test (the
# suite at every CPU level this machine has, and the CLI checks). Any report
# fails the run: leaks, out-of-bounds reads and writes, and undefined behaviour
# (-fno-sanitize-recover). Then the Python package built the same way, its tests
# run with the sanitizer runtimes preloaded (leak checks off there: the
# interpreter keeps its own objects to the end), beside the frameworks
# scripts/frameworks_check.sh installed, when it has. CI runs it last.
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"
cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLASHATTN_WITH_CUDA=OFF \
  -DFLASHATTN_SANITIZE=address,undefined
cmake --build build-sanitize --parallel "$(nproc)"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
(cd build-sanitize && ctest --output-on-failure --parallel "$(nproc)")

site="$PWD/build-sanitize/python/site"
python3 -m pip install --quiet --no-build-isolation --no-deps --upgrade --target "$site" . \
  --config-settings=cmake.define.FLASHATTN_WITH_CUDA=OFF \
  --config-settings=cmake.define.FLASHATTN_SANITIZE=address,undefined \
  --config-settings=build-dir=build-sanitize/python/build
preload="$(g++ -print-file-name=libasan.so):$(g++ -print-file-name=libubsan.so)"
LD_PRELOAD="$preload" ASAN_OPTIONS="detect_leaks=0:abort_on_error=1" \
  PYTHONPATH="$site:$PWD/build/frameworks-site" \
  python3 -m pytest -q -p no:cacheprovider tests/python_pkg --ignore=tests/python_pkg/gpu
