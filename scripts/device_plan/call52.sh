#!/usr/bin/env bash
# Session 46: v24 (the forward's cut last round, .devc/e.tar.xz: the DRAM-priced plan)
# timed where it matters, forward only, non-causal, four rounds: A = cuts off (=0), B =
# the plan (3 pieces at hd128 8k / 16k and hd64 2k / 4k, none at hd256), C = main
# (.devc/h.tar.xz: the cost of the epilogue's branch is C against A). Then a call with
# fewer tiles than SMs (B = 1, 4 heads of 128, N = 2048: 64 tiles, cut in two), A = off,
# B = planned, four rounds.
# run(command="bash .devc/call52.sh 2>&1 | tee $OUT/call52.log", carry=[".devc"]), ~4 minutes.
# ROUNDS, HDIMS and LIMIT (seconds for the first A/B) shorten it (call53.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
rm -rf .dev/e; python3 -c "import tarfile; tarfile.open('.devc/e.tar.xz').extractall('.dev')"
[ -d .dev/h ] || python3 -c "import tarfile; tarfile.open('.devc/h.tar.xz').extractall('.dev')"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
OMP_NUM_THREADS=16 timeout 100 .dev/e/flashattn_tests --gtest_filter='HopperSplit/*bf16*:Sm90FwdSplit*:CudaGraph*' 2>&1 \
  | grep -E "^\[  (PASSED|FAILED) |^\[       OK" | sed 's/MatchesReference\///'
echo "tests done at $((SECONDS - start)) s"
E=.dev/e/libflashattn_bench_shim.so
ROUNDS=${ROUNDS:-4} ENV_a=FLASHATTN_SM90_FWD_SPLIT=0 \
  timeout ${LIMIT:-240} bash scripts/gpu_ab_bench.sh $E $E,.dev/h/libflashattn_bench_shim.so $OUT/ab_p --fwd-only --causal 0 --hdims ${HDIMS:-64,128,256} \
  --seqlens 2048,4096,8192,16384 > $OUT/ab_p.txt 2>&1
tail -13 $OUT/ab_p.txt
echo "grid points done at $((SECONDS - start)) s"
ROUNDS=${ROUNDS:-4} ENV_a=FLASHATTN_SM90_FWD_SPLIT=0 \
  timeout 100 bash scripts/gpu_ab_bench.sh $E $E $OUT/ab_few --fwd-only --causal 0 --hdims 128 \
  --seqlens 2048 --tokens 2048 --model-dim 512 > $OUT/ab_few.txt 2>&1
tail -2 $OUT/ab_few.txt
tar czf $OUT/ab.tgz -C $OUT ab_p ab_few 2>/dev/null && rm -rf $OUT/ab_p $OUT/ab_few
echo "all done at $((SECONDS - start)) s"
