#!/usr/bin/env bash
# A planned device call (session 36): v34 with group 1's read of P^T handed to group 0
# through an mbarrier (p_read) instead of a named-barrier arrive, which racecheck
# reported in call 4. `bash scripts/device_plan/prepare.sh` builds and packs what it
# carries: a (main as it is by default) and h (the same with -DFLASHATTN_SM90_BWD_DQ_APART=ON),
# bf16 sm_90a, head dims 128, 192 and 256 (hd192 takes dQ apart too, unmeasured). If clean: the option's default (src/CMakeLists.txt)
# and FLASHATTN_SM90_BWD_DQ_APART's (bwd_switches.h) become ON / 1.
# run(command="bash .devc/call5.sh 2>&1 | tee $OUT/call5.log", carry=[".devc"]), about 3 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
[ -d .dev/a ] || python3 -c "import tarfile; tarfile.open('.devc/bins.tar.xz').extractall('.dev')"
python3 -c "import tarfile; tarfile.open('.devc/h.tar.xz').extractall('.dev')"
nvidia-smi --query-gpu=name --format=csv,noheader
S='Hopper256/CudaBackward.*-*_f16_*'
tst h_racecheck 120 4 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/h/flashattn_tests --gtest_filter="$S" --gtest_brief=1 &
tst h_synccheck 120 4 compute-sanitizer --tool synccheck --error-exitcode 9 .dev/h/flashattn_tests --gtest_filter="$S" --gtest_brief=1 &
wait
tst h_memcheck 120 4 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/h/flashattn_tests --gtest_filter="$S" --gtest_brief=1 &
tst h_bwd 120 4 .dev/h/flashattn_tests --gtest_filter='*CudaBackward*hdim256*:*CudaBackward*hdim192*:Hopper256/*:CudaDeterministic*:*Graph*-*_f16_*'
wait
echo "checks done at $((SECONDS - start)) s"
ROUNDS=1 timeout 120 scripts/gpu_ab_bench.sh .dev/a/libflashattn_bench_shim.so .dev/h/libflashattn_bench_shim.so \
  $OUT/abh --hdims 192,256 --seqlens 1024,2048,4096,8192,16384 2>&1 | tee $OUT/abh.txt
pack
echo "all done at $((SECONDS - start)) s"
