#!/usr/bin/env bash
# A planned device call (prepare.sh copies it into .devc/ and builds what it reads):
# run(command="bash .devc/call1.sh 2>&1 | tee $OUT/call1.log", carry=[".devc"]), about 9 minutes.
# GPU: the v33 variants' backward tests (b, d), A/B of hd256 (a | b, c) and of hd64 / hd128
# (a | d, e) over 1024-16384 keys, causal and not, then memcheck / racecheck on b and d.
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
python3 -c "import tarfile; tarfile.open('.devc/bins.tar.xz').extractall('.dev')"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
X='-*_f16_*:*hdim192*'
tst b_bwd 150 8 .dev/b/flashattn_tests --gtest_filter="*CudaBackward*hdim256*:Hopper256/*:CudaDeterministic*$X"
tst d_bwd 200 8 .dev/d/flashattn_tests --gtest_filter="*CudaBackward*:CudaDeterministic*-*hdim256*:*_f16_*:*hdim192*"
echo "tests done at $((SECONDS - start)) s"
ROUNDS=2 timeout 200 scripts/gpu_ab_bench.sh .dev/a/libflashattn_bench_shim.so .dev/b/libflashattn_bench_shim.so,.dev/c/libflashattn_bench_shim.so \
  $OUT/ab256 --hdims 256 --seqlens 1024,2048,4096,8192,16384 2>&1 | tee $OUT/ab256.txt
echo "ab256 done at $((SECONDS - start)) s"
ROUNDS=2 timeout 260 scripts/gpu_ab_bench.sh .dev/a/libflashattn_bench_shim.so .dev/d/libflashattn_bench_shim.so,.dev/e/libflashattn_bench_shim.so \
  $OUT/ab128 --hdims 64,128 --seqlens 1024,2048,4096,8192,16384 2>&1 | tee $OUT/ab128.txt
echo "ab128 done at $((SECONDS - start)) s"
tar -czf $OUT/ab.tar.gz -C $OUT ab256 ab128 2>/dev/null; rm -rf $OUT/ab256 $OUT/ab128
left=$((555 - (SECONDS - start)))
F256="Hopper256/CudaBackward.*hdim256*$X"
F128="Hopper/CudaBackward.*hdim128_full_bf16*:Hopper/CudaBackward.*hdim128_packed_causal*:Hopper/CudaBackward.*hdim64*causal*$X"
if [ $left -gt 40 ]; then
  tst b_memcheck $left 4 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/b/flashattn_tests --gtest_filter="$F256" --gtest_brief=1 &
  tst b_racecheck $left 4 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/b/flashattn_tests --gtest_filter="$F256" --gtest_brief=1 &
  tst d_memcheck $left 4 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/d/flashattn_tests --gtest_filter="$F128" --gtest_brief=1 &
  tst d_racecheck $left 4 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/d/flashattn_tests --gtest_filter="$F128" --gtest_brief=1 &
  wait
fi
pack
echo "all done at $((SECONDS - start)) s"
