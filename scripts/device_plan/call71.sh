#!/usr/bin/env bash
# Session 51: sm90 backward v46 (dS formed without the softmax scale: dK takes it in the
# epilogue, dQ in its conversion pass). w = build-sm90-f (bf16) with the six bf16 backward
# units rebuilt (.devc/w.tar.xz); v = main (.devc/v.tar.xz). w's backward tests (bf16),
# memcheck and racecheck on the small cases (hd256's split formation among them), then the
# A/B of v and w, three rounds, hd64 / hd128 / hd256. Time-boxed by CAP.
# run(command="bash .devc/call71.sh 2>&1 | tee $OUT/call71.log", carry=[".devc"], timeout_s=500)
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
CAP=${CAP:-480}
rm -rf .dev/w .dev/v; python3 -c "import tarfile; [tarfile.open(f'.devc/{n}.tar.xz').extractall('.dev') for n in 'wv']"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
T=.dev/w/flashattn_tests
tst bwd 200 8 $T --gtest_filter='*CudaBackward*:Cuda/CudaDeterministic*:CudaGraph*:BackwardGqa*-*_f16_*' &
tst memcheck 200 4 compute-sanitizer --tool memcheck --error-exitcode 9 $T \
  --gtest_filter='HeadDims/CudaBackward*hdim64*:HeadDims/CudaBackward*hdim128*:Hopper/CudaBackward*hdim256_full*:Hopper/CudaBackward*hdim128_softcap*-*_f16_*' --gtest_brief=1 &
tst racecheck 200 4 compute-sanitizer --tool racecheck --error-exitcode 9 $T \
  --gtest_filter='HeadDims/CudaBackward*hdim128*:HeadDims/CudaBackward*hdim256*-*_f16_*' --gtest_brief=1 &
wait
echo "tests done at $((SECONDS - start)) s"
ROUNDS=${ROUNDS:-3} timeout $((CAP - 10 - (SECONDS - start))) bash scripts/gpu_ab_bench.sh .dev/v/libflashattn_bench_shim.so \
  .dev/w/libflashattn_bench_shim.so $OUT/ab_w --hdims 64,128,256 --seqlens 1024,4096,16384 > $OUT/ab_w.txt 2>&1
tail -45 $OUT/ab_w.txt
tar czf $OUT/ab_w.tgz -C $OUT ab_w 2>/dev/null && rm -rf $OUT/ab_w
pack
echo "all done at $((SECONDS - start)) s"
