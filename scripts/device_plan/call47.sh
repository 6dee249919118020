#!/usr/bin/env bash
# Session 44: sm90 backward v42 (dQ tiles claimed by the first key block: stored, not
# added; no zeroing of the accumulator), branch s44-sm90-bwd-dq-claim built in
# build-sm90-f (.devc/c.tar.xz), against main (.devc/h.tar.xz: v23 = main's kernels).
# Tests, memcheck and initcheck, then the A/B at hd64 / hd128 (the forward is
# unchanged: the drift), three rounds.
# run(command="bash .devc/call47.sh 2>&1 | tee $OUT/call47.log", carry=[".devc"]), ~6 minutes;
# SHORT=1 (~4 minutes, e.g. with timeout_s=250): no initcheck, tighter limits, two rounds
# at N = 1k-16k.
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
short=${SHORT:-0}
for x in h c; do [ -d .dev/$x ] || python3 -c "import tarfile; tarfile.open('.devc/$x.tar.xz').extractall('.dev')"; done
nvidia-smi --query-gpu=name --format=csv,noheader
T=.dev/c/flashattn_tests
S='Hopper/CudaBackward*hdim64*:Hopper/CudaBackward*hdim128*'  # then -*_f16_* (negative patterns last)
if [ "$short" = 1 ]; then
  tst bwd 80 6 $T --gtest_filter='*CudaBackward*:Cuda/CudaDeterministic*:CudaGraph*:BackwardGqa*-*_f16_*:*hdim256*:*hdim192*' &
  tst memcheck 80 4 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter="$S-*_f16_*:*long*" --gtest_brief=1 &
  wait
  ab=(ROUNDS=2 --seqlens 1024,2048,4096,16384); limit=225
else
  tst bwd 150 8 $T --gtest_filter='*CudaBackward*:Cuda/CudaDeterministic*:CudaGraph*:BackwardGqa*-*_f16_*'
  tst memcheck 150 8 compute-sanitizer --tool memcheck --error-exitcode 9 $T \
    --gtest_filter="$S:Masks/CudaBackward*:Cuda/CudaDeterministic*hdim128*-*_f16_*" --gtest_brief=1 &
  # initcheck: nothing reads an accumulator tile that no key block wrote
  tst initcheck 150 4 compute-sanitizer --tool initcheck --error-exitcode 9 $T --gtest_filter="$S-*_f16_*" --gtest_brief=1 &
  wait
  ab=(ROUNDS=3); limit=480
fi
echo "tests done at $((SECONDS - start)) s"
env "${ab[0]}" timeout $((limit - (SECONDS - start))) bash scripts/gpu_ab_bench.sh .dev/h/libflashattn_bench_shim.so \
  .dev/c/libflashattn_bench_shim.so $OUT/ab_c --hdims 64,128 "${ab[@]:1}" > $OUT/ab_c.txt 2>&1
tail -26 $OUT/ab_c.txt
tar czf $OUT/ab_c.tgz -C $OUT ab_c 2>/dev/null && rm -rf $OUT/ab_c
pack
echo "all done at $((SECONDS - start)) s"
