#!/usr/bin/env bash
# Session 55's plan for the next GPU session. f = main with v33 landed (PACK=f GPU_ONLY=1
# prepare.sh; hd64 / 128 / 256), o = main's hd96 / hd192 and o2 = branch s55-sm90-fwd-lazy-hd192
# (v33 at hd192 too), both HEAD_DIMS="96;192" BUILD_DIR=build-sm90-o PACK=o|o2 GPU_ONLY=1
# prepare.sh (on main, then on the branch). First the new Hopper large_scores cases (scores in
# the hundreds, so the lazy rescaling moves its reference mid-row); then in parallel the bf16
# forward suite (f), hd96 / hd192's forward cases (o and o2) and memcheck of the new cases and of
# o2's hd192 ones; then the A/B of o and o2 at hd192 (forward only, three rounds).
# run(command="bash .devc/call89.sh 2>&1 | tee $OUT/call89.log", carry=[".devc"], timeout_s=250)
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
unpack f o o2
T=.dev/f/flashattn_tests
L=${TLIM:-110}
tst large 60 1 $T --gtest_filter='Hopper/CudaForward*large_scores*-*_f16_*'
tst fwd $L 10 $T --gtest_filter='*CudaForward*:CudaGraph*:CudaKvCache*:Sm90FwdSplit*-*_f16_*' &
tst other $L 2 .dev/o/flashattn_tests --gtest_filter='HopperOtherDims/CudaForward*-*_f16_*' &
tst other2 $L 2 .dev/o2/flashattn_tests --gtest_filter='HopperOtherDims/CudaForward*-*_f16_*' &
tst memcheck $L 2 compute-sanitizer --tool memcheck --error-exitcode 9 $T \
  --gtest_filter='Hopper/CudaForward*large_scores*-*_f16_*' --gtest_brief=1 &
tst memcheck2 $L 1 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/o2/flashattn_tests \
  --gtest_filter='HopperOtherDims/CudaForward*hdim192*-*_f16_*' --gtest_brief=1 &
wait
echo "tests done at $((SECONDS - start)) s"
ROUNDS=${ROUNDS:-3} timeout $((${CAP:-235} - (SECONDS - start))) bash scripts/gpu_ab_bench.sh .dev/o/libflashattn_bench_shim.so \
  .dev/o2/libflashattn_bench_shim.so $OUT/ab --fwd-only --hdims 192 --seqlens 512,1024,2048,8192,16384 > $OUT/ab.txt 2>&1
tail -11 $OUT/ab.txt
rm -rf $OUT/ab
pack
echo "all done at $((SECONDS - start)) s"
