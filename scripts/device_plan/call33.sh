#!/usr/bin/env bash
# Session 42, call 33: the Hopper forward's balanced tail (branch s42-sm90-fwd-balanced-tail,
# third build: no spills; b = main + the tail, bf16 sm_90a; d = main before it). Tests,
# sanitizers, A/B (d vs b; b with the tail off vs on), the forward grid beside the peers.
# Builds 1 and 2 ran the same steps as calls 31 and 32 (with more test suites and the SASS
# spill sites from cuobjdump); results of all three: bench/results/*_s42_*.
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
for v in b d; do [ -d .dev/$v ] || python3 -c "import tarfile; tarfile.open('.devc/$v.tar.xz').extractall('.dev')"; done
nvidia-smi --query-gpu=name --format=csv,noheader
T=.dev/b/flashattn_tests
tst fwd 200 8 $T --gtest_filter='BalancedTail/*:Hopper/CudaForward*:CudaGraph*:Hopper/CudaKvCache*:SequsedK/*-*_f16_*' &
S='BalancedTail/*:CudaGraph.Balanced*'
tst memcheck 200 4 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter="$S" --gtest_brief=1 &
tst racecheck 200 4 compute-sanitizer --tool racecheck --error-exitcode 9 $T --gtest_filter="$S" --gtest_brief=1 &
wait
echo "checks done at $((SECONDS - start)) s"
pack
ROUNDS=2 timeout 150 bash scripts/gpu_ab_bench.sh .dev/d/libflashattn_bench_shim.so .dev/b/libflashattn_bench_shim.so \
  $OUT/ab1 --fwd-only --hdims 64,128,256 > $OUT/ab_d_vs_b.txt 2>&1
tail -37 $OUT/ab_d_vs_b.txt
A_ENV=FLASHATTN_SM90_FWD_BALANCE=0 ROUNDS=2 timeout 150 bash scripts/gpu_ab_bench.sh .dev/b/libflashattn_bench_shim.so \
  .dev/b/libflashattn_bench_shim.so $OUT/ab2 --fwd-only --hdims 64,128,256 --causal 0 > $OUT/ab_off_vs_on.txt 2>&1
tail -19 $OUT/ab_off_vs_on.txt
echo "ab done at $((SECONDS - start)) s"
timeout 120 python3 bench/gpu/bench_gpu.py --shim .dev/b/libflashattn_bench_shim.so --warmup-ms 100 --fwd-only \
  --json $OUT/grid_fwd.json > $OUT/grid_fwd.txt 2>&1
cat $OUT/grid_fwd.txt | tail -38
pack
echo "all done at $((SECONDS - start)) s"
