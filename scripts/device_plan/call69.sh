#!/usr/bin/env bash
# Session 50: sm90 backward v45 (v44 + the wgmma descriptors formed in uniform registers;
# .devc/x.tar.xz = build-sm90-f with the eight bf16 backward units rebuilt at that commit).
# Its backward tests (bf16), memcheck and racecheck on the small cases; the A/B of main
# (.devc/v.tar.xz), v44 (.devc/w.tar.xz) and v45, three rounds; then v45's grid capped and
# with the order rotated, the issues' targets checked. Time-boxed by CAP (s).
# run(command="bash .devc/call69.sh 2>&1 | tee $OUT/call69.log", carry=[".devc"], timeout_s=560)
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
rm -rf .dev/x; python3 -c "import tarfile; [tarfile.open(f'.devc/{n}.tar.xz').extractall('.dev') for n in 'xwv']"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
T=.dev/x/flashattn_tests
tst bwd 170 8 $T --gtest_filter='*CudaBackward*:Cuda/CudaDeterministic*:CudaGraph*:BackwardGqa*-*_f16_*' &
tst memcheck 170 4 compute-sanitizer --tool memcheck --error-exitcode 9 $T \
  --gtest_filter='HeadDims/CudaBackward*hdim64*:HeadDims/CudaBackward*hdim128*:Hopper/CudaBackward*hdim64_full*:Hopper/CudaBackward*hdim128_softcap*-*_f16_*' --gtest_brief=1 &
tst racecheck 170 4 compute-sanitizer --tool racecheck --error-exitcode 9 $T \
  --gtest_filter='HeadDims/CudaBackward*hdim128*:HeadDims/CudaBackward*hdim256*-*_f16_*' --gtest_brief=1 &
wait
echo "tests done at $((SECONDS - start)) s"
ROUNDS=${ROUNDS:-3} timeout $((${CAP:-540} - 110 - (SECONDS - start))) bash scripts/gpu_ab_bench.sh .dev/v/libflashattn_bench_shim.so \
  .dev/w/libflashattn_bench_shim.so,.dev/x/libflashattn_bench_shim.so $OUT/ab_x --hdims 64,128,256 --seqlens 1024,4096,16384 > $OUT/ab_x.txt 2>&1
tail -40 $OUT/ab_x.txt
tar czf $OUT/ab_x.tgz -C $OUT ab_x 2>/dev/null && rm -rf $OUT/ab_x
echo "a/b done at $((SECONDS - start)) s"
CAP=${CAP:-540}
grid capped .dev/x/libflashattn_bench_shim.so --warmup-ms 100
grid rotate1 .dev/x/libflashattn_bench_shim.so --interleave --rotate --rounds 6 --repeats 24
for g in capped rotate1; do [ -f $OUT/grid_$g.json ] && python3 bench/gpu/targets.py $OUT/grid_$g.json; done
pack
echo "all done at $((SECONDS - start)) s"
