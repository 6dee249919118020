#!/usr/bin/env bash
# A planned device call (session 37, for session 38): v40, the hd128 backward (by keys,
# plain scores) reading its step's LSE before S^T's wait and d_i before dP^T's
# (k2: FLASHATTN_SM90_BWD_ROW_REGS=1 in the hd128 unit) against f (main): hd128 backward,
# deterministic and graph tests, racecheck / synccheck / memcheck on hd128 cases, then
# the A/B f | k2. `bash scripts/device_plan/prepare.sh` builds and packs f and k2.
# run(command="bash .devc/call13.sh 2>&1 | tee $OUT/call13.log", carry=[".devc"]), about 4 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
for v in f k2; do [ -d .dev/$v ] || python3 -c "import tarfile; tarfile.open('.devc/$v.tar.xz').extractall('.dev')"; done
nvidia-smi --query-gpu=name --format=csv,noheader
S='Hopper/CudaBackward.*hdim128_*-*_f16_*:*long_keys*'
tst k2_racecheck 120 4 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/k2/flashattn_tests --gtest_filter="$S" --gtest_brief=1 &
tst k2_synccheck 120 4 compute-sanitizer --tool synccheck --error-exitcode 9 .dev/k2/flashattn_tests --gtest_filter="$S" --gtest_brief=1 &
wait
tst k2_memcheck 120 4 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/k2/flashattn_tests --gtest_filter="$S" --gtest_brief=1 &
tst k2_bwd 120 4 .dev/k2/flashattn_tests --gtest_filter='*CudaBackward*hdim128*:CudaDeterministic*:*Graph*-*_f16_*'
wait
echo "checks done at $((SECONDS - start)) s"
grep -hE 'ERROR SUMMARY: [1-9]|RACECHECK SUMMARY: [1-9]|^\[  FAILED  \] [A-Za-z]' $logs/k2_*.log | sort | uniq -c
ROUNDS=2 timeout 150 scripts/gpu_ab_bench.sh .dev/f/libflashattn_bench_shim.so .dev/k2/libflashattn_bench_shim.so \
  $OUT/abk --hdims 128 --seqlens 1024,2048,4096,8192,16384 2>&1 | tee $OUT/abk.txt
pack
echo "all done at $((SECONDS - start)) s"
