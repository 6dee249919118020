#!/usr/bin/env bash
# Session 44: sm90 backward v41 (dQ tiles claimed by the first key block: stored, not
# added; no zeroing of the accumulator), branch s44-sm90-bwd-dq-claim built in
# build-sm90-f (.devc/c.tar.xz), against main (.devc/h.tar.xz: v23 = main's kernels).
# Tests, memcheck / initcheck / racecheck, then the A/B at hd64 / hd128 (forward
# unchanged: the drift), three rounds.
# run(command="bash .devc/call47.sh 2>&1 | tee $OUT/call47.log", carry=[".devc"])
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
for x in h c; do [ -d .dev/$x ] || python3 -c "import tarfile; tarfile.open('.devc/$x.tar.xz').extractall('.dev')"; done
nvidia-smi --query-gpu=name --format=csv,noheader
T=.dev/c/flashattn_tests
S='Hopper/CudaBackward*hdim64*:Hopper/CudaBackward*hdim128*:Masks/CudaBackward*:Cuda/CudaDeterministic*hdim128*-*_f16_*'
tst bwd 150 8 $T --gtest_filter='*CudaBackward*:Cuda/CudaDeterministic*:CudaGraph*:BackwardGqa*-*_f16_*'
tst memcheck 150 8 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter="$S" --gtest_brief=1 &
tst initcheck 150 4 compute-sanitizer --tool initcheck --error-exitcode 9 $T --gtest_filter='Hopper/CudaBackward*hdim64*:Hopper/CudaBackward*hdim128*-*_f16_*' --gtest_brief=1 &
wait
echo "tests done at $((SECONDS - start)) s"
[ $((SECONDS - start)) -lt 330 ] && ROUNDS=3 timeout $((480 - (SECONDS - start))) bash scripts/gpu_ab_bench.sh .dev/h/libflashattn_bench_shim.so .dev/c/libflashattn_bench_shim.so \
  $OUT/ab_c --hdims 64,128 > $OUT/ab_c.txt 2>&1
tail -26 $OUT/ab_c.txt
tar czf $OUT/ab_c.tgz -C $OUT ab_c 2>/dev/null && rm -rf $OUT/ab_c
pack
echo "all done at $((SECONDS - start)) s"
