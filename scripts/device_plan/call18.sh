#!/usr/bin/env bash
# A planned device call (session 40, branch s40-bwd-rows-early): v41, the hd128 backward
# (by keys, plain scores) reading its step's LSE before S^T is issued (v41b:
# FLASHATTN_SM90_BWD_ROW_REGS=3; v41a: =2, d_i before dP^T too, 48 bytes of spills), built
# with scripts/variant_build.sh on the hd128 bf16 sm_90a build, against f (main): v41b's
# hd128 backward tests and racecheck / synccheck, then the A/B f | v41b (v41a carried, not timed).
# run(command="bash .devk2/call18.sh 2>&1 | tee $OUT/call18.log", carry=[".devk2"]), about 4 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
. .devk2/lib.sh
start=$SECONDS
mkdir -p .dev
[ -d .dev/f ] || tar -xJf .devk2/f.tar.xz -C .dev
[ -d .dev/v41b ] || tar -xJf .devk2/v41.tar.xz -C .dev
nvidia-smi --query-gpu=name --format=csv,noheader
S='Hopper/CudaBackward.*hdim128_*-*_f16_*:*long_keys*'
if [ "${SHORT:-0}" = 1 ]; then  # a small budget: the tests, one A/B round
  tst v41_bwd 60 4 .dev/v41b/flashattn_tests --gtest_filter='*CudaBackward*hdim128*-*_f16_*'
  ROUNDS=1 timeout 90 scripts/gpu_ab_bench.sh .dev/f/libflashattn_bench_shim.so .dev/v41b/libflashattn_bench_shim.so \
    $OUT/ab41 --hdims 128 --seqlens 4096,8192,16384 2>&1 | tee $OUT/ab41.txt | tail -12
  pack; echo "all done at $((SECONDS - start)) s"; exit 0
fi
tst v41_racecheck 120 4 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/v41b/flashattn_tests --gtest_filter="$S" --gtest_brief=1 &
tst v41_synccheck 120 4 compute-sanitizer --tool synccheck --error-exitcode 9 .dev/v41b/flashattn_tests --gtest_filter="$S" --gtest_brief=1 &
wait
tst v41_bwd 120 4 .dev/v41b/flashattn_tests --gtest_filter='*CudaBackward*hdim128*:CudaDeterministic*:*Graph*-*_f16_*'
echo "checks done at $((SECONDS - start)) s"
grep -hE 'ERROR SUMMARY: [1-9]|RACECHECK SUMMARY: [1-9]|^\[  FAILED  \] [A-Za-z]' $logs/v41_*.log | sort | uniq -c
ROUNDS=2 timeout 150 scripts/gpu_ab_bench.sh .dev/f/libflashattn_bench_shim.so .dev/v41b/libflashattn_bench_shim.so \
  $OUT/ab41 --hdims 128 --seqlens 2048,4096,8192,16384 2>&1 | tee $OUT/ab41.txt | tail -20
pack
echo "all done at $((SECONDS - start)) s"
