#!/usr/bin/env bash
# Session 55: main with v33 landed (.devc/f.tar.xz: PACK=f GPU_ONLY=1 prepare.sh), with the
# new Hopper large_scores cases (scores in the hundreds, so the lazy rescaling moves its
# reference mid-row): those first, then the bf16 forward suite in 12 shards, the hd96 / hd192
# forward cases (.devc/o.tar.xz: HEAD_DIMS="96;192" BUILD_DIR=build-sm90-o PACK=o GPU_ONLY=1
# prepare.sh; hd192 takes the lazy rescaling unmeasured) and memcheck of the new cases.
# run(command="bash .devc/call89.sh 2>&1 | tee $OUT/call89.log", carry=[".devc"], timeout_s=170)
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
unpack f o
T=.dev/f/flashattn_tests
tst large 60 1 $T --gtest_filter='Hopper/CudaForward*large_scores*-*_f16_*'
tst fwd ${TLIM:-110} 12 $T --gtest_filter='*CudaForward*:CudaGraph*:CudaKvCache*:Sm90FwdSplit*-*_f16_*' &
tst other ${TLIM:-110} 2 .dev/o/flashattn_tests --gtest_filter='HopperOtherDims/CudaForward*-*_f16_*' &
tst memcheck ${TLIM:-110} 2 compute-sanitizer --tool memcheck --error-exitcode 9 $T \
  --gtest_filter='Hopper/CudaForward*large_scores*-*_f16_*' --gtest_brief=1 &
wait
pack
echo "all done at $((SECONDS - start)) s"
