#!/usr/bin/env bash
# A planned device call (session 37): call5.sh's checks of v34 (dQ apart, with the
# p_read mbarrier handoff, and the dQ kernel launched programmatically beside the
# key-block kernel's last wave) and its A/B against main at hd192/hd256, and the
# same build with FLASHATTN_SM90_PDL=0 against itself. prepare.sh builds h with
# head dims 64, 128, 192 and 256, so call7.sh's grid runs on it alone.
# run(command="bash .devc/call6.sh 2>&1 | tee $OUT/call6.log", carry=[".devc"]), about 5 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
[ -d .dev/a ] || python3 -c "import tarfile; tarfile.open('.devc/bins.tar.xz').extractall('.dev')"
python3 -c "import tarfile; tarfile.open('.devc/h.tar.xz').extractall('.dev')"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
S='Hopper256/CudaBackward.*-*_f16_*'
tst h_racecheck 150 4 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/h/flashattn_tests --gtest_filter="$S" --gtest_brief=1 &
tst h_synccheck 150 4 compute-sanitizer --tool synccheck --error-exitcode 9 .dev/h/flashattn_tests --gtest_filter="$S" --gtest_brief=1 &
wait
tst h_memcheck 150 4 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/h/flashattn_tests --gtest_filter="$S" --gtest_brief=1 &
tst h_bwd 150 4 .dev/h/flashattn_tests --gtest_filter='*CudaBackward*hdim256*:*CudaBackward*hdim192*:Hopper256/*:CudaDeterministic*:*Graph*-*_f16_*'
wait
echo "checks done at $((SECONDS - start)) s"
ROUNDS=1 timeout 100 scripts/gpu_ab_bench.sh .dev/a/libflashattn_bench_shim.so .dev/h/libflashattn_bench_shim.so \
  $OUT/abh --hdims 192,256 --seqlens 1024,4096,16384 2>&1 | tee $OUT/abh.txt
A_ENV=FLASHATTN_SM90_PDL=0 ROUNDS=2 timeout 100 scripts/gpu_ab_bench.sh .dev/h/libflashattn_bench_shim.so \
  .dev/h/libflashattn_bench_shim.so $OUT/pdl --hdims 256 --seqlens 1024,4096,16384 2>&1 | tee $OUT/pdl.txt
bad=$(cat $logs/h_*.log | grep -cE 'ERROR SUMMARY: [1-9]|^\[  FAILED  \] [A-Za-z]|Hazard|hazard')
echo "problems in the checks: $bad"
pack
echo "all done at $((SECONDS - start)) s"
