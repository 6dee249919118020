#!/usr/bin/env bash
# The test command: set up, build, and run every test (GoogleTest suite, CLI
# checks against the NumPy oracle, find_package consumer) through CTest, then the
# Python package's tests with pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh "$@"
(cd build && ctest --output-on-failure --parallel "$(nproc)")

# The Python package, built CPU-only for speed (the library it wraps is the one built
# above; tests/python_pkg/gpu/run_gpu_tests.sh runs its GPU half on a GPU machine) into
# build/python/site, leaving the environment alone; then its tests (the PyTorch,
# JAX and transformers ones skip where those are not installed).
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}" CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
python3 -m pip install --quiet --no-build-isolation --no-deps --upgrade --target build/python/site . \
  --config-settings=cmake.define.FLASHATTN_WITH_CUDA=OFF
PYTHONPATH="$PWD/build/python/site" python3 -m pytest -q -p no:cacheprovider tests/python_pkg \
  --ignore=tests/python_pkg/gpu
