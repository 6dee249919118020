#!/usr/bin/env bash
# Session 56's plan for an H200: main's grid (pack f, call87's capped and rotated runs), then
# v33 at hd96 (branch s56-sm90-fwd-lazy-hd96, pack o3 = HEAD_DIMS="96;192"
# BUILD_DIR=build-sm90-o PACK=o3 GPU_ONLY=1 prepare.sh on the branch): its hd96 forward cases
# and memcheck, then the A/B against main's o at hd96 (forward only, three rounds).
# run(command="bash .devc/call91.sh 2>&1 | tee $OUT/call91.log", carry=[".devc"], timeout_s=460,
#     needs_h200=true)
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
unpack f o o3
CAP=${GRID_CAP:-300} P=f bash .devc/call87.sh
tst other3 60 2 .dev/o3/flashattn_tests --gtest_filter='HopperOtherDims/CudaForward*hdim96*-*_f16_*' &
tst memcheck3 60 1 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/o3/flashattn_tests \
  --gtest_filter='HopperOtherDims/CudaForward*hdim96*large*-*_f16_*' --gtest_brief=1 &
wait
ROUNDS=3 timeout $((${CAP:-450} - (SECONDS - start))) bash scripts/gpu_ab_bench.sh .dev/o/libflashattn_bench_shim.so \
  .dev/o3/libflashattn_bench_shim.so $OUT/ab --fwd-only --hdims 96 --seqlens 512,1024,2048,4096,8192,16384 > $OUT/ab.txt 2>&1
tail -n 13 $OUT/ab.txt
rm -rf $OUT/ab
pack
echo "all done at $((SECONDS - start)) s"
