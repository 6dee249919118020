#!/usr/bin/env bash
# Session 51: sm90 forward v27 (branch s51-fwd-desc-try: v26's group-slice descriptors also in
# hd64's three-group kernel, and Q's descriptors held in uniform registers across the key loop
# instead of q_desc_in_loop's re-derivation). y = build-sm90-f (bf16) with the three bf16
# forward units rebuilt (.devc/y.tar.xz); x = main with v26 (.devc/x.tar.xz). y's forward tests
# (bf16), memcheck and racecheck on small Hopper cases, then the A/B of x and y (forward
# only), two rounds, hd64 / hd128 / hd256, N = 1k / 4k / 16k. Time-boxed by CAP.
# run(command="bash .devc/call75.sh 2>&1 | tee $OUT/call75.log", carry=[".devc"], timeout_s=300)
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
CAP=${CAP:-280}
rm -rf .dev/x .dev/y; python3 -c "import tarfile; [tarfile.open(f'.devc/{n}.tar.xz').extractall('.dev') for n in 'xy']"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
T=.dev/y/flashattn_tests
tst fwd 150 8 $T --gtest_filter='*CudaForward*:CudaGraph*:CudaKvCache*:Sm90FwdSplit*-*_f16_*' &
tst memcheck 150 4 compute-sanitizer --tool memcheck --error-exitcode 9 $T \
  --gtest_filter='Hopper/CudaForward*hdim128_full*:Hopper/CudaForward*hdim64_causal_long*:Hopper/CudaForward*hdim256_full*:Hopper/CudaForward*hdim64_full*-*_f16_*' --gtest_brief=1 &
tst racecheck 150 4 compute-sanitizer --tool racecheck --error-exitcode 9 $T \
  --gtest_filter='Hopper/CudaForward*hdim128_full*:Hopper/CudaForward*hdim128_window_bf16*:Hopper/CudaForward*hdim64_causal_long*:Hopper/CudaForward*hdim64_full*-*_f16_*' --gtest_brief=1 &
wait
echo "tests done at $((SECONDS - start)) s"
ROUNDS=${ROUNDS:-2} timeout $((CAP - 10 - (SECONDS - start))) bash scripts/gpu_ab_bench.sh .dev/x/libflashattn_bench_shim.so \
  .dev/y/libflashattn_bench_shim.so $OUT/ab_y --fwd-only --hdims 64,128,256 --seqlens 1024,4096,16384 > $OUT/ab_y.txt 2>&1
tail -25 $OUT/ab_y.txt
rm -rf $OUT/ab_y
pack
echo "all done at $((SECONDS - start)) s"
