#!/usr/bin/env bash
# Session 45: sm90 backward v43 (the last wave's key blocks cut into pieces, bwd_tail.h),
# branch s45-sm90-bwd-tail built in build-sm90-f (.devc/d.tar.xz). Tests, memcheck on
# the small hd64 / hd128 cases and the cut-wave cases, then the A/B against main
# (.devc/h.tar.xz) at hd64 / hd128, three rounds.
# run(command="bash .devc/call48.sh 2>&1 | tee $OUT/call48.log", carry=[".devc"]), ~6 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
rm -rf .dev/d; python3 -c "import tarfile; tarfile.open('.devc/d.tar.xz').extractall('.dev')"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
T=.dev/d/flashattn_tests
tst bwd 150 8 $T --gtest_filter='*CudaBackward*:Cuda/CudaDeterministic*:CudaGraph*:BackwardGqa*-*_f16_*' &
tst memcheck 150 4 compute-sanitizer --tool memcheck --error-exitcode 9 $T \
  --gtest_filter='HopperTail/*:Sm90Tail*:HeadDims/CudaBackward*hdim64*:Hopper/CudaBackward*hdim64_full*:Hopper/CudaBackward*hdim128_softcap*-*_f16_*' --gtest_brief=1 &
wait
echo "tests done at $((SECONDS - start)) s"
[ -d .dev/h ] || python3 -c "import tarfile; tarfile.open('.devc/h.tar.xz').extractall('.dev')"
# A = main (v23 kernels), B = this build: non-causal rows carry the cut, causal rows only
# the decoding (the producer reads its batch entry from shared memory in a cut wave).
ROUNDS=${ROUNDS:-3} timeout $((560 - (SECONDS - start))) bash scripts/gpu_ab_bench.sh .dev/h/libflashattn_bench_shim.so \
  .dev/d/libflashattn_bench_shim.so $OUT/ab_d --hdims 64,128 > $OUT/ab_d.txt 2>&1
tail -50 $OUT/ab_d.txt
tar czf $OUT/ab_d.tgz -C $OUT ab_d 2>/dev/null && rm -rf $OUT/ab_d
pack
echo "all done at $((SECONDS - start)) s"
