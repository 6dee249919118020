#!/usr/bin/env bash
# A planned device call (session 36): v34 with group 1's read of P^T handed to group 0
# through an mbarrier (p_read) instead of a named-barrier arrive, which racecheck
# reported in call 4. h = a bf16 sm_90a build with the switch on, packed as .devc/h.tar.xz:
#   cmake -S . -B build-s36on -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real \
#     -DFLASHATTN_SM80_COMPACT_ARCHITECTURES=90a-real -DFLASHATTN_SM80_LARGE_ARCHITECTURES=90a-real \
#     -DFLASHATTN_CUDA_DTYPES=bf16 -DFLASHATTN_CUDA_HEAD_DIMS="128;256" -DFLASHATTN_SM90_BWD_DQ_APART=ON
#   ninja -C build-s36on flashattn_tests flashattn_bench_shim
#   mkdir -p .dev/h && cp build-s36on/tests/flashattn_tests build-s36on/bench/gpu/libflashattn_bench_shim.so .dev/h/
#   (cd .dev && tar -cf - h | xz -T2 -6 > ../.devc/h.tar.xz); cp scripts/device_plan/{lib,call5}.sh .devc/
# A (main before v34) comes from prepare.sh's bins.tar.xz; without it, skip the A/B or build main
# with the option off as A. If clean: the option's default (src/CMakeLists.txt) and
# FLASHATTN_SM90_BWD_DQ_APART's (bwd_switches.h) become ON / 1.
# run(command="bash .devc/call5.sh 2>&1 | tee $OUT/call5.log", carry=[".devc"]), about 3 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
[ -d .dev/a ] || python3 -c "import tarfile; tarfile.open('.devc/bins.tar.xz').extractall('.dev')"
python3 -c "import tarfile; tarfile.open('.devc/h.tar.xz').extractall('.dev')"
nvidia-smi --query-gpu=name --format=csv,noheader
S='Hopper256/CudaBackward.*hdim256*-*_f16_*'
tst h_racecheck 120 4 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/h/flashattn_tests --gtest_filter="$S" --gtest_brief=1 &
tst h_synccheck 120 4 compute-sanitizer --tool synccheck --error-exitcode 9 .dev/h/flashattn_tests --gtest_filter="$S" --gtest_brief=1 &
wait
tst h_memcheck 120 4 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/h/flashattn_tests --gtest_filter="$S" --gtest_brief=1 &
tst h_bwd 120 4 .dev/h/flashattn_tests --gtest_filter='*CudaBackward*hdim256*:Hopper256/*:CudaDeterministic*:*Graph*-*_f16_*:*hdim192*'
wait
echo "checks done at $((SECONDS - start)) s"
ROUNDS=1 timeout 120 scripts/gpu_ab_bench.sh .dev/a/libflashattn_bench_shim.so .dev/h/libflashattn_bench_shim.so \
  $OUT/abh --hdims 256 --seqlens 1024,2048,4096,8192,16384 2>&1 | tee $OUT/abh.txt
pack
echo "all done at $((SECONDS - start)) s"
