#!/usr/bin/env bash
# The test command: set up, build, and run every test (GoogleTest suite, CLI
# checks against the NumPy oracle, find_package consumer) through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh "$@"
cd build
ctest --output-on-failure --parallel "$(nproc)"
