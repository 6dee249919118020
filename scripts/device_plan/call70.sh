#!/usr/bin/env bash
# Session 50: what lands. m = main with v44 as it lands (dS^T by stmatrix only; the d_i
# scaling of call 68's build stays on a branch: it rebuilds every sm80 backward unit in CI);
# u = m + v45 (wgmma descriptors in uniform registers). Both: build-sm90-f with the eight bf16
# backward units rebuilt (.devc/m.tar.xz, .devc/u.tar.xz). The backward tests (bf16) of both,
# memcheck and racecheck of u on the small cases; the A/B of main before (.devc/v.tar.xz), m and
# u, three rounds; then u's grid capped and rotated with the targets checked. Time-boxed by CAP.
# run(command="bash .devc/call70.sh 2>&1 | tee $OUT/call70.log", carry=[".devc"], timeout_s=520)
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
CAP=${CAP:-480}
rm -rf .dev/m .dev/u; python3 -c "import tarfile; [tarfile.open(f'.devc/{n}.tar.xz').extractall('.dev') for n in 'muv']"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
F='*CudaBackward*:Cuda/CudaDeterministic*:CudaGraph*:BackwardGqa*-*_f16_*'
tst bwd_m 200 6 .dev/m/flashattn_tests --gtest_filter="$F" &
tst bwd_u 200 6 .dev/u/flashattn_tests --gtest_filter="$F" &
tst memcheck_u 200 2 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/u/flashattn_tests \
  --gtest_filter='HeadDims/CudaBackward*hdim64*:HeadDims/CudaBackward*hdim128*:Hopper/CudaBackward*hdim128_softcap*-*_f16_*' --gtest_brief=1 &
tst racecheck_u 200 2 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/u/flashattn_tests \
  --gtest_filter='HeadDims/CudaBackward*hdim128*:HeadDims/CudaBackward*hdim64*-*_f16_*' --gtest_brief=1 &
wait
echo "tests done at $((SECONDS - start)) s"
ROUNDS=${ROUNDS:-3} timeout $((CAP - 100 - (SECONDS - start))) bash scripts/gpu_ab_bench.sh .dev/v/libflashattn_bench_shim.so \
  .dev/m/libflashattn_bench_shim.so,.dev/u/libflashattn_bench_shim.so $OUT/ab_mu --hdims 64,128,256 --seqlens 1024,4096,16384 > $OUT/ab_mu.txt 2>&1
tail -40 $OUT/ab_mu.txt
tar czf $OUT/ab_mu.tgz -C $OUT ab_mu 2>/dev/null && rm -rf $OUT/ab_mu
echo "a/b done at $((SECONDS - start)) s"
grid capped .dev/u/libflashattn_bench_shim.so --warmup-ms 100
grid rotate1 .dev/u/libflashattn_bench_shim.so --interleave --rotate --rounds 6 --repeats 24
for g in capped rotate1; do [ -f $OUT/grid_$g.json ] && python3 bench/gpu/targets.py $OUT/grid_$g.json; done
pack
echo "all done at $((SECONDS - start)) s"
