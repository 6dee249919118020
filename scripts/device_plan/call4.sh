#!/usr/bin/env bash
# A planned device call (session 36): v34 as landed (FLASHATTN_SM90_BWD_DQ_APART on by
# default; the key-block kernel without its dQ), a bf16 sm_90a build of main packed as
# .devc/g.tar.xz (tests + shim), beside prepare.sh's a (main before v34) and call 3's f
# (v34's first form): run(command="bash .devc/call4.sh 2>&1 | tee $OUT/call4.log",
# carry=[".devc"]), about 6 minutes. g's backward tests (every bf16 head dim built),
# A/B a | f, g at hd256, ncu of g's kernels at 16k, memcheck / racecheck on g.
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
[ -d .dev/a ] || python3 -c "import tarfile; tarfile.open('.devc/bins.tar.xz').extractall('.dev')"
[ -d .dev/f ] || python3 -c "import tarfile; tarfile.open('.devc/f.tar.xz').extractall('.dev')"
python3 -c "import tarfile; tarfile.open('.devc/g.tar.xz').extractall('.dev')"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
tst g_bwd 200 8 .dev/g/flashattn_tests --gtest_filter='*CudaBackward*:CudaDeterministic*:Hopper256/*:*Graph*-*_f16_*:*hdim192*'
echo "tests done at $((SECONDS - start)) s"
ROUNDS=2 timeout 240 scripts/gpu_ab_bench.sh .dev/a/libflashattn_bench_shim.so .dev/f/libflashattn_bench_shim.so,.dev/g/libflashattn_bench_shim.so \
  $OUT/abg --hdims 256 --seqlens 1024,2048,4096,8192,16384 2>&1 | tee $OUT/abg.txt
echo "ab done at $((SECONDS - start)) s"
timeout 90 ncu --profile-from-start off --clock-control none -k 'regex:bwd_kernel|dq_kernel|row_dot' \
  --section SpeedOfLight --metrics sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active \
  python3 bench/gpu/kernel_timeline.py .dev/g/libflashattn_bench_shim.so ncu 256:16384:0 > $OUT/ncu_g256.txt 2>&1
grep -E "^  [a-zA-Z_].*\(|Duration|tensor_cycles|Compute \(SM\)|L2 Cache Th" $OUT/ncu_g256.txt | cut -c1-160 | head -30
left=$((520 - (SECONDS - start)))
S='Hopper256/CudaBackward.*hdim256*-*_f16_*'
if [ $left -gt 40 ]; then
  tst g_memcheck $left 4 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/g/flashattn_tests --gtest_filter="$S" --gtest_brief=1 &
  tst g_racecheck $left 4 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/g/flashattn_tests --gtest_filter="$S" --gtest_brief=1 &
  tst g_synccheck $left 4 compute-sanitizer --tool synccheck --error-exitcode 9 .dev/g/flashattn_tests --gtest_filter="$S" --gtest_brief=1 &
  wait
fi
pack
echo "all done at $((SECONDS - start)) s"
