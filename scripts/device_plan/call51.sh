#!/usr/bin/env bash
# Session 46: the Hopper forward's cut last round (branch s46-sm90-fwd-split, built in
# build-sm90-f, bf16 only: .devc/e.tar.xz). Tests: the cut cases, the Hopper forward
# suites, then the same with every possible cut forced into 16 pieces
# (FLASHATTN_SM90_FWD_SPLIT=16); memcheck on two cut cases; then forward only, non-causal:
# A = the build with cuts off (=0), B = the build as planned, C = main (.devc/h.tar.xz),
# D..G = cuts forced into 2 / 3 / 5 / 8 pieces, two rounds.
# run(command="bash .devc/call51.sh 2>&1 | tee $OUT/call51.log", carry=[".devc"]), ~7 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
rm -rf .dev/e; python3 -c "import tarfile; tarfile.open('.devc/e.tar.xz').extractall('.dev')"
[ -d .dev/h ] || python3 -c "import tarfile; tarfile.open('.devc/h.tar.xz').extractall('.dev')"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
T=.dev/e/flashattn_tests
F='HopperSplit/*:Sm90FwdSplit*:Hopper/CudaForward*:HopperOtherDims/CudaForward*hdim192*:Lengths/CudaForward*:Layouts/CudaForward*-*_f16_*'
tst split 150 4 $T --gtest_filter="$F"
export FLASHATTN_SM90_FWD_SPLIT=16
tst split16 150 4 $T --gtest_filter="$F"
unset FLASHATTN_SM90_FWD_SPLIT
echo "tests done at $((SECONDS - start)) s"
timeout 120 compute-sanitizer --tool memcheck $T --gtest_filter='HopperSplit/*hdim128_cut_round*bf16*:HopperSplit/*hdim64_cut_round*bf16*' \
  > $logs/memcheck.log 2>&1; grep -E "ERROR SUMMARY|PASSED|FAILED" $logs/memcheck.log | head -5; pack
echo "memcheck done at $((SECONDS - start)) s"
E=.dev/e/libflashattn_bench_shim.so
ROUNDS=2 ENV_a=FLASHATTN_SM90_FWD_SPLIT=0 ENV_d=FLASHATTN_SM90_FWD_SPLIT=2 ENV_e=FLASHATTN_SM90_FWD_SPLIT=3 \
  ENV_f=FLASHATTN_SM90_FWD_SPLIT=5 ENV_g=FLASHATTN_SM90_FWD_SPLIT=8 \
  timeout $((560 - (SECONDS - start))) bash scripts/gpu_ab_bench.sh $E $E,.dev/h/libflashattn_bench_shim.so,$E,$E,$E,$E \
  $OUT/ab_s --fwd-only --causal 0 --seqlens 1024,2048,4096,8192,16384 > $OUT/ab_s.txt 2>&1
tail -22 $OUT/ab_s.txt
tar czf $OUT/ab_s.tgz -C $OUT ab_s 2>/dev/null && rm -rf $OUT/ab_s
pack
echo "all done at $((SECONDS - start)) s"
