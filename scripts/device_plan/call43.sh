#!/usr/bin/env bash
# Prepared in session 43 (sm90 forward v23, branch s43-sm90-fwd-hd128-switches): hd128's
# 128 x 128 tiles with late_p / uniform_group / q_desc_in_loop, the 128 x 192 entry from
# 8192 / 16384 keys. d = main's build (.devc/d.tar.xz), h = the branch's (ninja on the branch
# in build-sm90-f, flashattn_tests + the shim packed as .devc/h.tar.xz). The A/B d vs h at
# hd64 (unchanged: the drift) and hd128, three rounds; then h's Hopper forward tests and
# racecheck / memcheck on its hd128 cases.
# run(command="bash .devc/call43.sh 2>&1 | tee $OUT/call43.log", carry=[".devc"]), about 6 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
for x in d h; do [ -d .dev/$x ] || python3 -c "import tarfile; tarfile.open('.devc/$x.tar.xz').extractall('.dev')"; done
nvidia-smi --query-gpu=name --format=csv,noheader
ROUNDS=3 timeout 200 bash scripts/gpu_ab_bench.sh .dev/d/libflashattn_bench_shim.so .dev/h/libflashattn_bench_shim.so \
  $OUT/ab_h --fwd-only --hdims 64,128 > $OUT/ab_h.txt 2>&1
tail -25 $OUT/ab_h.txt
echo "A/B done at $((SECONDS - start)) s"
T=.dev/h/flashattn_tests
tst fwd 240 8 $T --gtest_filter='Hopper/CudaForward*:HopperOtherDims/CudaForward*:CudaGraph*:Hopper/CudaKvCache*:SequsedK/*-*_f16_*' &
tst racecheck 240 4 compute-sanitizer --tool racecheck --error-exitcode 9 $T \
  --gtest_filter='Hopper/CudaForward*hdim128*-*_f16_*' --gtest_brief=1 &
wait
tst memcheck 150 8 compute-sanitizer --tool memcheck --error-exitcode 9 $T \
  --gtest_filter='Hopper/CudaForward*hdim128*:Hopper/CudaKvCache*hd128*-*_f16_*' --gtest_brief=1
pack
echo "all done at $((SECONDS - start)) s"
