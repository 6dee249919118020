#!/usr/bin/env bash
# Session 56's plan. f = main (PACK=f GPU_ONLY=1 prepare.sh), o = main's hd96 / hd192
# (HEAD_DIMS="96;192" BUILD_DIR=build-sm90-o PACK=o GPU_ONLY=1 prepare.sh), both with the
# large_scores cases' backward (hd64 / 128 / 256) and hd96 / hd192's new large_scores_causal
# (hd192's forward now rescales lazily). Tests and memcheck first; then, on an H200 only
# (the issues' targets are H200 figures), main's grid capped and rotated (call87's).
# run(command="bash .devc/call90.sh 2>&1 | tee $OUT/call90.log", carry=[".devc"], timeout_s=420)
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
unpack f o
T=.dev/f/flashattn_tests
tst large 90 2 $T --gtest_filter='Hopper/Cuda*large_scores*-*_f16_*' &
tst other 90 2 .dev/o/flashattn_tests --gtest_filter='HopperOtherDims/Cuda*-*_f16_*' &
tst memcheck 90 2 compute-sanitizer --tool memcheck --error-exitcode 9 $T \
  --gtest_filter='Hopper/CudaBackward*large_scores*-*_f16_*' --gtest_brief=1 &
tst memcheck2 90 1 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/o/flashattn_tests \
  --gtest_filter='HopperOtherDims/Cuda*large_scores*-*_f16_*' --gtest_brief=1 &
wait
echo "tests done at $((SECONDS - start)) s"
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  CAP=${GRID_CAP:-300} P=f bash .devc/call87.sh
fi
pack
echo "all done at $((SECONDS - start)) s"
