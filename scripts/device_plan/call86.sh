#!/usr/bin/env bash
# call85 cut to what ~130 s of device time holds (session 54's last minutes): the A/B of l2
# (main's kernels) and g (v32: Q per consumer group), three rounds, N = 512 and 1024, causal
# and not, first; then g's forward tests and memcheck of small cases in what is left.
# run(command="bash .devc/call86.sh 2>&1 | tee $OUT/call86.log", carry=[".devc"], timeout_s=140)
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
unpack l2 g
ROUNDS=${ROUNDS:-3} timeout 70 bash scripts/gpu_ab_bench.sh .dev/l2/libflashattn_bench_shim.so \
  .dev/g/libflashattn_bench_shim.so $OUT/ab_g --fwd-only --seqlens 512,1024 > $OUT/ab_g.txt 2>&1
tail -13 $OUT/ab_g.txt
rm -rf $OUT/ab_g
echo "A/B done at $((SECONDS - start)) s"
T=.dev/g/flashattn_tests
left=$((130 - (SECONDS - start)))
tst fwd $left 11 $T --gtest_filter='*CudaForward*:Sm90FwdSplit*-*_f16_*' &
tst memcheck $left 3 compute-sanitizer --tool memcheck --error-exitcode 9 $T \
  --gtest_filter='Hopper/CudaForward*hdim128_causal_s*:Hopper/CudaForward*hdim64_causal_s*:Hopper/CudaForward*hdim256_causal_sq*:Hopper/CudaForward*hdim256_packed_bf16*-*_f16_*' --gtest_brief=1 &
wait
pack
echo "all done at $((SECONDS - start)) s"
