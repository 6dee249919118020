#!/usr/bin/env bash
# Session 54's plan: sm90 forward v32 (branch s54-sm90-fwd-q-per-group: Q loaded and released
# per consumer group's rows, each with its own barriers, so a group done with its Q, or where O
# is staged over Q its O stored, lets its rows of the next Q in without waiting for the other
# group; the consumers' top stall at N = 512 causal is the wait for Q, call 80). l2 = main's
# kernels (.devc/l2.tar.xz), g = the branch (PACK=g GPU_ONLY=1 prepare.sh). g's forward tests
# (bf16), memcheck and racecheck on small cases; then the A/B of l2 and g (forward only), three
# rounds, N = 512 .. 2048, causal and not.
# Build: bash scripts/device_plan/prepare85.sh (on main).
# run(command="bash .devc/call85.sh 2>&1 | tee $OUT/call85.log", carry=[".devc"], timeout_s=250)
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
CAP=${CAP:-230}
unpack l2 g
T=.dev/g/flashattn_tests
tst fwd ${TLIM:-100} 11 $T --gtest_filter='*CudaForward*:CudaGraph*:CudaKvCache*:Sm90FwdSplit*-*_f16_*' &
tst memcheck ${TLIM:-100} 3 compute-sanitizer --tool memcheck --error-exitcode 9 $T \
  --gtest_filter='Hopper/CudaForward*hdim128_causal_s*:Hopper/CudaForward*hdim64_causal_s*:Hopper/CudaForward*hdim256_causal_sq*:Hopper/CudaForward*hdim256_packed_bf16*:HopperSplit/CudaForward*hdim256*:Hopper/CudaForward*hdim64_packed_causal*-*_f16_*' --gtest_brief=1 &
tst racecheck ${TLIM:-100} 2 compute-sanitizer --tool racecheck --error-exitcode 9 $T \
  --gtest_filter='Hopper/CudaForward*hdim128_causal_sq*:Hopper/CudaForward*hdim256_causal_sq*-*_f16_*' --gtest_brief=1 &
wait
echo "tests done at $((SECONDS - start)) s"
ROUNDS=${ROUNDS:-3} timeout $((CAP - (SECONDS - start))) bash scripts/gpu_ab_bench.sh .dev/l2/libflashattn_bench_shim.so \
  .dev/g/libflashattn_bench_shim.so $OUT/ab_g --fwd-only --seqlens 512,1024,2048 ${AB_ARGS:-} > $OUT/ab_g.txt 2>&1
tail -26 $OUT/ab_g.txt
rm -rf $OUT/ab_g
pack
echo "all done at $((SECONDS - start)) s"
