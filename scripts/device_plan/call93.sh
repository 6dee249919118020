#!/usr/bin/env bash
# Session 57's plan. f = main (PACK=f GPU_ONLY=1 prepare.sh), p = branch s57-sm90-bwd-pair,
# sm90 backward v47 (HEAD_DIMS="64;96;128" BUILD_DIR=build-sm90-p PACK=p GPU_ONLY=1
# prepare.sh). The pairs' tests (HopperPairs), the Hopper backward suites that reach them,
# memcheck and racecheck; then the backward A/B against main, non-causal (the only calls
# the pairs take), three rounds; on an H200 then main's grid, capped, in what time is left.
# run(command="bash .devc/call93.sh 2>&1 | tee $OUT/call93.log", carry=[".devc"], timeout_s=600)
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
unpack f p
T=.dev/p/flashattn_tests
tst pairs 120 2 $T --gtest_filter='HopperPairs/CudaBackward*-*_f16_*' &
tst bwd 150 2 $T --gtest_filter='Hopper/CudaBackward*:HopperOtherDims/CudaBackward*hdim96*:Lengths/CudaBackward*:Features/CudaBackward*-*_f16_*' &
tst memcheck 150 2 compute-sanitizer --tool memcheck --error-exitcode 9 $T \
  --gtest_filter='HopperPairs/CudaBackward*-*_f16_*' --gtest_brief=1 &
wait
tst racecheck 90 2 compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 9 $T \
  --gtest_filter='HopperPairs/CudaBackward*pair_ragged*:HopperPairs/CudaBackward*hdim128*many_steps*-*_f16_*' --gtest_brief=1
echo "tests done at $((SECONDS - start)) s"
ROUNDS=3 timeout $((440 - (SECONDS - start))) bash scripts/gpu_ab_bench.sh .dev/f/libflashattn_bench_shim.so \
  .dev/p/libflashattn_bench_shim.so $OUT/ab --causal 0 --hdims 64,128 --seqlens 1024,2048,4096,8192,16384 > $OUT/ab.txt 2>&1
tail -n 24 $OUT/ab.txt
echo "ab done at $((SECONDS - start)) s"
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  CAP=${GRID_CAP:-580}
  grid capped .dev/f/libflashattn_bench_shim.so --warmup-ms 100
  [ -f $OUT/grid_capped.json ] && python3 bench/gpu/targets.py $OUT/grid_capped.json
fi
pack
echo "all done at $((SECONDS - start)) s"
