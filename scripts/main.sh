#!/usr/bin/env bash
# The main job: set up, build, then run and check attention on the best backend
# present (CUDA when a GPU is visible, the CPU flash backend otherwise): random
# configurations of every feature against the float64 reference, then a short
# benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh "$@"
fa=build/tools/cli/flashattn
"$fa" info
"$fa" check --backend auto
"$fa" bench --backend auto --no-reference
