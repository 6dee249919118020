#!/usr/bin/env bash
# Session 50: sm90 backward v44 (branch s50-sm90-bwd-ds-stsm: dS^T stored by stmatrix, d_i
# pre-scaled by the row-dot pass; .devc/w.tar.xz = build-sm90-f with the eight bf16 backward
# units rebuilt). Its backward tests (bf16), memcheck and racecheck on the small cases, then the
# A/B against main (.devc/v.tar.xz), three rounds, hd64 / hd128 / hd256.
# run(command="bash .devc/call68.sh 2>&1 | tee $OUT/call68.log", carry=[".devc"], timeout_s=590)
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
rm -rf .dev/w; python3 -c "import tarfile; [tarfile.open(f'.devc/{n}.tar.xz').extractall('.dev') for n in 'wv']"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
T=.dev/w/flashattn_tests
tst bwd 170 8 $T --gtest_filter='*CudaBackward*:Cuda/CudaDeterministic*:CudaGraph*:BackwardGqa*-*_f16_*' &
tst memcheck 170 4 compute-sanitizer --tool memcheck --error-exitcode 9 $T \
  --gtest_filter='HeadDims/CudaBackward*hdim64*:HeadDims/CudaBackward*hdim128*:Hopper/CudaBackward*hdim64_full*:Hopper/CudaBackward*hdim128_softcap*-*_f16_*' --gtest_brief=1 &
tst racecheck 170 4 compute-sanitizer --tool racecheck --error-exitcode 9 $T \
  --gtest_filter='HeadDims/CudaBackward*hdim128*:HeadDims/CudaBackward*hdim256*-*_f16_*' --gtest_brief=1 &
wait
echo "tests done at $((SECONDS - start)) s"
ROUNDS=${ROUNDS:-3} timeout $((570 - (SECONDS - start))) bash scripts/gpu_ab_bench.sh .dev/v/libflashattn_bench_shim.so \
  .dev/w/libflashattn_bench_shim.so $OUT/ab_w --hdims 64,128,256 --seqlens 1024,4096,16384 > $OUT/ab_w.txt 2>&1
tail -45 $OUT/ab_w.txt
tar czf $OUT/ab_w.tgz -C $OUT ab_w 2>/dev/null && rm -rf $OUT/ab_w
pack
echo "all done at $((SECONDS - start)) s"
