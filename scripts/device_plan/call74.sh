#!/usr/bin/env bash
# Session 51: sm90 forward v26 (branch s51-sm90-fwd-q-desc-uniform: Q's wgmma descriptors from
# the slice of the group's first thread in the two-group plain kernels, as the backward's v45).
# x = build-sm90-f (bf16) with the three bf16 forward units rebuilt (.devc/x.tar.xz); v = main
# (.devc/v.tar.xz). x's forward tests (bf16) and the CUDA-graph / KV-cache / split suites,
# memcheck and racecheck on small Hopper cases, then the A/B of v and x (forward only), three
# rounds, hd64 / hd128 / hd256, N = 1k / 4k / 16k. Time-boxed by CAP.
# run(command="bash .devc/call74.sh 2>&1 | tee $OUT/call74.log", carry=[".devc"], timeout_s=420)
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
CAP=${CAP:-390}
rm -rf .dev/x .dev/v; python3 -c "import tarfile; [tarfile.open(f'.devc/{n}.tar.xz').extractall('.dev') for n in 'xv']"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
T=.dev/x/flashattn_tests
tst fwd 200 8 $T --gtest_filter='*CudaForward*:CudaGraph*:CudaKvCache*:Sm90FwdSplit*:CudaLarge*-*_f16_*' &
tst memcheck 200 4 compute-sanitizer --tool memcheck --error-exitcode 9 $T \
  --gtest_filter='Hopper/CudaForward*hdim128_full*:Hopper/CudaForward*hdim128_causal_sq_gt_sk*:Hopper/CudaForward*hdim256_full*:Hopper/CudaForward*hdim128_packed_bf16*-*_f16_*' --gtest_brief=1 &
tst racecheck 200 4 compute-sanitizer --tool racecheck --error-exitcode 9 $T \
  --gtest_filter='Hopper/CudaForward*hdim128_full*:Hopper/CudaForward*hdim128_window_bf16*:Hopper/CudaForward*hdim256_full*:Hopper/CudaForward*hdim64_full*-*_f16_*' --gtest_brief=1 &
wait
echo "tests done at $((SECONDS - start)) s"
ROUNDS=${ROUNDS:-3} timeout $((CAP - 10 - (SECONDS - start))) bash scripts/gpu_ab_bench.sh .dev/v/libflashattn_bench_shim.so \
  .dev/x/libflashattn_bench_shim.so $OUT/ab_x --fwd-only --hdims 64,128,256 --seqlens 1024,4096,16384 > $OUT/ab_x.txt 2>&1
tail -25 $OUT/ab_x.txt
tar czf $OUT/ab_x.tgz -C $OUT ab_x 2>/dev/null && rm -rf $OUT/ab_x
pack
echo "all done at $((SECONDS - start)) s"
