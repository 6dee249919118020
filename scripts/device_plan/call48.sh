#!/usr/bin/env bash
# Session 44, short form of call47.sh (the device budget left ~350 s): v42's backward
# tests and memcheck side by side, then a two-round A/B at hd64 / hd128, N = 1k-16k.
# run(command="bash .devc/call48.sh 2>&1 | tee $OUT/call48.log", carry=[".devc"], timeout_s=250)
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
for x in h c; do [ -d .dev/$x ] || python3 -c "import tarfile; tarfile.open('.devc/$x.tar.xz').extractall('.dev')"; done
nvidia-smi --query-gpu=name --format=csv,noheader
T=.dev/c/flashattn_tests
tst bwd 80 6 $T --gtest_filter='*CudaBackward*:Cuda/CudaDeterministic*:CudaGraph*:BackwardGqa*-*_f16_*:*hdim256*:*hdim192*' &
tst memcheck 80 4 compute-sanitizer --tool memcheck --error-exitcode 9 $T \
  --gtest_filter='Hopper/CudaBackward*hdim64*:Hopper/CudaBackward*hdim128*-*_f16_*:*long*' --gtest_brief=1 &
wait
echo "tests done at $((SECONDS - start)) s"
ROUNDS=2 timeout $((225 - (SECONDS - start))) bash scripts/gpu_ab_bench.sh .dev/h/libflashattn_bench_shim.so .dev/c/libflashattn_bench_shim.so \
  $OUT/ab_c --hdims 64,128 --seqlens 1024,2048,4096,16384 > $OUT/ab_c.txt 2>&1
tail -18 $OUT/ab_c.txt
tar czf $OUT/ab_c.tgz -C $OUT ab_c 2>/dev/null && rm -rf $OUT/ab_c
pack
echo "all done at $((SECONDS - start)) s"
