#!/usr/bin/env bash
# A planned device call (session 36): the sm90 backward with dQ apart (v34,
# FLASHATTN_SM90_BWD_DQ_APART=1 over the hd256 bf16 unit, built into .dev/f by
#   scripts/variant_build.sh BUILD .dev/f . sm90/instantiations/bwd_hdim256_bf16_sm90.cu -DFLASHATTN_SM90_BWD_DQ_APART=1
# and packed as .devc/f.tar.xz beside prepare.sh's bins.tar.xz, whose a is main):
# run(command="bash .devc/call3.sh 2>&1 | tee $OUT/call3.log", carry=[".devc"]), about 6 minutes.
# f's hd256 backward tests, A/B a | f over 1024-16384 keys, ncu of both kernels at 16k,
# memcheck / racecheck on f.
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
[ -d .dev/a ] || python3 -c "import tarfile; tarfile.open('.devc/bins.tar.xz').extractall('.dev')"
python3 -c "import tarfile; tarfile.open('.devc/f.tar.xz').extractall('.dev')"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
F='*CudaBackward*hdim256*:Hopper256/*:CudaDeterministic*-*_f16_*:*hdim192*'
tst f_bwd 150 8 .dev/f/flashattn_tests --gtest_filter="$F"
echo "tests done at $((SECONDS - start)) s"
ROUNDS=2 timeout 220 scripts/gpu_ab_bench.sh .dev/a/libflashattn_bench_shim.so .dev/f/libflashattn_bench_shim.so \
  $OUT/abf --hdims 256 --seqlens 1024,2048,4096,8192,16384 2>&1 | tee $OUT/abf.txt
echo "ab done at $((SECONDS - start)) s"
timeout 90 ncu --profile-from-start off --clock-control none -k 'regex:bwd_kernel|dq_kernel|row_dot|dq_convert' \
  --section SpeedOfLight --metrics sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active \
  python3 bench/gpu/kernel_timeline.py .dev/f/libflashattn_bench_shim.so ncu 256:16384:0 > $OUT/ncu_f256.txt 2>&1
grep -E "^  [a-zA-Z_].*\(|Duration|tensor_cycles|Compute \(SM\)|L2 Cache Th" $OUT/ncu_f256.txt | cut -c1-160 | head -30
left=$((520 - (SECONDS - start)))
S='Hopper256/CudaBackward.*hdim256*-*_f16_*'
if [ $left -gt 40 ]; then
  tst f_memcheck $left 4 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/f/flashattn_tests --gtest_filter="$S" --gtest_brief=1 &
  tst f_racecheck $left 4 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/f/flashattn_tests --gtest_filter="$S" --gtest_brief=1 &
  wait
fi
pack
echo "all done at $((SECONDS - start)) s"
