#!/usr/bin/env bash
# A planned device call (session 37, for session 38): v38, the hd192 / hd256 key-block
# kernel (dQ apart) issuing the next step's S^T / dP^T right behind this step's dV / dK
# (g: FLASHATTN_SM90_BWD_APART_B2B=1), and the same with the step's LSE / d_i read into
# registers before the product's wait (g2: =2), against f (main): their hd192 / hd256 /
# deterministic / graph backward tests and the sanitizers on the Hopper256 cases, then
# the A/B f | g, g2. `bash scripts/device_plan/prepare.sh` builds and packs f, g and g2.
# run(command="bash .devc/call11.sh 2>&1 | tee $OUT/call11.log", carry=[".devc"]), about 7 minutes;
# SHORT=1: g2's tests and racecheck side by side, one A/B round at hd256 (about 2 minutes).
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
for v in f g g2; do [ -d .dev/$v ] || python3 -c "import tarfile; tarfile.open('.devc/$v.tar.xz').extractall('.dev')"; done
nvidia-smi --query-gpu=name --format=csv,noheader
S='Hopper256/CudaBackward.*-*_f16_*'
T='*CudaBackward*hdim256*:*CudaBackward*hdim192*:Hopper256/*:CudaDeterministic*:*Graph*-*_f16_*'
race() { tst $1_racecheck 120 4 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/$1/flashattn_tests --gtest_filter="$S" --gtest_brief=1; }
sync_() { tst $1_synccheck 120 4 compute-sanitizer --tool synccheck --error-exitcode 9 .dev/$1/flashattn_tests --gtest_filter="$S" --gtest_brief=1; }
if [ "${SHORT:-0}" = 1 ]; then
  race g2 &
  tst g2_bwd 100 4 .dev/g2/flashattn_tests --gtest_filter="$T"
  wait
else
  race g2 & sync_ g2 & wait
  race g & tst g2_memcheck 120 4 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/g2/flashattn_tests --gtest_filter="$S" --gtest_brief=1 & wait
  tst g2_bwd 100 4 .dev/g2/flashattn_tests --gtest_filter="$T"
  tst g_bwd 100 4 .dev/g/flashattn_tests --gtest_filter="$T"
fi
echo "checks done at $((SECONDS - start)) s"
grep -hE 'ERROR SUMMARY: [1-9]|RACECHECK SUMMARY: [1-9]|^\[  FAILED  \] [A-Za-z]' $logs/g*.log | sort | uniq -c
if [ "${SHORT:-0}" = 1 ]; then
  ROUNDS=1 timeout 100 scripts/gpu_ab_bench.sh .dev/f/libflashattn_bench_shim.so \
    .dev/g/libflashattn_bench_shim.so,.dev/g2/libflashattn_bench_shim.so $OUT/abg --hdims 256 --seqlens 1024,4096,16384 2>&1 | tee $OUT/abg.txt
else
  ROUNDS=2 timeout 200 scripts/gpu_ab_bench.sh .dev/f/libflashattn_bench_shim.so \
    .dev/g/libflashattn_bench_shim.so,.dev/g2/libflashattn_bench_shim.so $OUT/abg --hdims 192,256 --seqlens 1024,4096,16384 2>&1 | tee $OUT/abg.txt
fi
pack
echo "all done at $((SECONDS - start)) s"
