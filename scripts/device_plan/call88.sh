#!/usr/bin/env bash
# Session 55's plan: two forward variants against main in one alternation. l2 = main's kernels,
# g = v32 (branch s54-sm90-fwd-q-per-group: Q loaded and released per consumer group),
# z = v33 (branch s55-sm90-fwd-lazy-rescale: a row's reference max moves only when a score of
# the warp passes it by 2^8, so most key tiles skip O's rescale). Forward tests of g and z
# (bf16), memcheck of both and racecheck of g on small cases, in parallel; then the A/B of
# l2 against g and z, three rounds, N = 512, 1024, 2048, 16384, causal and not.
# Build: prepare85.sh (l2, g), then PACK=z GPU_ONLY=1 prepare.sh on the v33 branch.
# run(command="bash .devc/call88.sh 2>&1 | tee $OUT/call88.log", carry=[".devc"], timeout_s=300)
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
unpack l2 g z
L=${TLIM:-100}
F='*CudaForward*:CudaGraph*:CudaKvCache*:Sm90FwdSplit*-*_f16_*'
M='Hopper/CudaForward*hdim128_causal_s*:Hopper/CudaForward*hdim64_causal_s*:Hopper/CudaForward*hdim256_causal_sq*:Hopper/CudaForward*hdim256_packed_bf16*:HopperSplit/CudaForward*hdim256*:Hopper/CudaForward*hdim64_packed_causal*-*_f16_*'
tst fwd_g $L 5 .dev/g/flashattn_tests --gtest_filter="$F" &
tst fwd_z $L 5 .dev/z/flashattn_tests --gtest_filter="$F" &
tst memcheck_g $L 2 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/g/flashattn_tests --gtest_filter="$M" --gtest_brief=1 &
tst memcheck_z $L 2 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/z/flashattn_tests --gtest_filter="$M" --gtest_brief=1 &
tst racecheck_g $L 2 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/g/flashattn_tests \
  --gtest_filter='Hopper/CudaForward*hdim128_causal_sq*:Hopper/CudaForward*hdim256_causal_sq*-*_f16_*' --gtest_brief=1 &
wait
echo "tests done at $((SECONDS - start)) s"
ROUNDS=${ROUNDS:-3} timeout $((${CAP:-280} - (SECONDS - start))) bash scripts/gpu_ab_bench.sh .dev/l2/libflashattn_bench_shim.so \
  .dev/g/libflashattn_bench_shim.so,.dev/z/libflashattn_bench_shim.so $OUT/ab --fwd-only --seqlens ${SEQLENS:-512,1024,2048,16384} > $OUT/ab.txt 2>&1
tail -28 $OUT/ab.txt
rm -rf $OUT/ab
pack
echo "all done at $((SECONDS - start)) s"
