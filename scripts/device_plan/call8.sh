#!/usr/bin/env bash
# A planned device call (session 37) on r = build-sm90-h at session 37's v36 and v37:
# the dQ kernel's split K / V ring (FLASHATTN_SM90_DQ_SPLIT_RING) and the
# programmatic launch of the fused backward's kernels (row-dot pass -> key blocks ->
# dQ conversion; FLASHATTN_SM90_PDL=0 turns every programmatic launch off).
# h = call 6's build (one ring; only the dQ kernel launched programmatically).
# 1. r: backward, deterministic and graph tests at every head dim built (64, 128, 192,
#    256); memcheck / synccheck / racecheck on hd256 and on hd128 and packed cases.
# 2. A/B h against r at hd192 / hd256 (the ring), and r against itself with
#    FLASHATTN_SM90_PDL=0 at hd64 / hd128 (the launch chain).
# run(command="bash .devc/call8.sh 2>&1 | tee $OUT/call8.log", carry=[".devc"]), about 6 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
for v in h r; do [ -d .dev/$v ] || python3 -c "import tarfile; tarfile.open('.devc/$v.tar.xz').extractall('.dev')"; done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
S='Hopper256/CudaBackward.*-*_f16_*:Hopper/CudaBackward.*hdim128*-*_f16_*:Hopper/CudaBackward.*packed*-*_f16_*:CudaGraph*-*_f16_*'
tst r_racecheck 170 4 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/r/flashattn_tests --gtest_filter="$S" --gtest_brief=1 &
tst r_synccheck 170 4 compute-sanitizer --tool synccheck --error-exitcode 9 .dev/r/flashattn_tests --gtest_filter="$S" --gtest_brief=1 &
wait
tst r_memcheck 170 4 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/r/flashattn_tests --gtest_filter="$S" --gtest_brief=1 &
tst r_bwd 170 4 .dev/r/flashattn_tests --gtest_filter='*CudaBackward*:CudaDeterministic*:*Graph*-*_f16_*'
wait
echo "checks done at $((SECONDS - start)) s"
grep -hE 'ERROR SUMMARY: [1-9]|RACECHECK SUMMARY: [1-9]|^\[  FAILED  \] [A-Za-z]' $logs/r_*.log | sort | uniq -c
ROUNDS=2 timeout 150 scripts/gpu_ab_bench.sh .dev/h/libflashattn_bench_shim.so .dev/r/libflashattn_bench_shim.so \
  $OUT/abr --hdims 192,256 --seqlens 1024,4096,16384 2>&1 | tee $OUT/abr.txt
A_ENV=FLASHATTN_SM90_PDL=0 ROUNDS=2 timeout 150 scripts/gpu_ab_bench.sh .dev/r/libflashattn_bench_shim.so \
  .dev/r/libflashattn_bench_shim.so $OUT/pdl --hdims 64,128 --seqlens 512,2048,8192 2>&1 | tee $OUT/pdl.txt
pack
echo "all done at $((SECONDS - start)) s"
