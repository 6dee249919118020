#!/usr/bin/env bash
# Session 54's plan: sm90 forward v31 (branch s54-sm90-fwd-o-regs: where shared memory holds no
# O tile, hd256's kernels and hd128's 128 x 192 entry, O leaves from registers and Q is
# released after the tile's last S, instead of O staged over Q with the next Q waiting for the
# TMA store; call 80 put the hd256 consumers' wait for Q at 14.3% of the samples at N = 512
# causal). l2 = main with v30b (.devc/l2.tar.xz), o = the branch (PACK=o GPU_ONLY=1
# prepare.sh). o's forward tests (bf16) with the graph / KV-cache / split suites, memcheck on
# hd256 cases (packed, split, causal); then the A/B of l2 and o (forward only), hd128 and
# hd256, the contract's lengths, causal and not, four rounds.
# run(command="bash .devc/call83.sh 2>&1 | tee $OUT/call83.log", carry=[".devc"], timeout_s=560)
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
CAP=${CAP:-540}
unpack l2 o
T=.dev/o/flashattn_tests
tst fwd ${TLIM:-150} 8 $T --gtest_filter='*CudaForward*:CudaGraph*:CudaKvCache*:Sm90FwdSplit*-*_f16_*' &
tst memcheck ${TLIM:-150} 4 compute-sanitizer --tool memcheck --error-exitcode 9 $T \
  --gtest_filter='Hopper/CudaForward*hdim256_causal_sq*:Hopper/CudaForward*hdim256_packed*:Hopper/CudaForward*hdim256_tiny*:HopperSplit/CudaForward*hdim256*:Hopper/CudaForward*hdim256_window_bf16*:Hopper/CudaForward*hdim256_mqa*-*_f16_*' --gtest_brief=1 &
wait
echo "tests done at $((SECONDS - start)) s"
ROUNDS=${ROUNDS:-4} timeout $((CAP - (SECONDS - start))) bash scripts/gpu_ab_bench.sh .dev/l2/libflashattn_bench_shim.so \
  .dev/o/libflashattn_bench_shim.so $OUT/ab_o --fwd-only --hdims 128,256 ${AB_ARGS:-} > $OUT/ab_o.txt 2>&1
tail -26 $OUT/ab_o.txt
rm -rf $OUT/ab_o
pack
echo "all done at $((SECONDS - start)) s"
