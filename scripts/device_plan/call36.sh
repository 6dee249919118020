#!/usr/bin/env bash
# Prepared in session 42 (branch s42-sm90-fwd-o-regs; sm90 forward v21): O from registers where
# it would be staged in Q's buffer (hd128's 128 x 192, hd192, hd256), so the next tile's Q
# loads under the last P V and the epilogue. d = main's build (prepare.sh), v = the variant
# (scripts/variant_build.sh build-sm90-f .dev/v . sm90/instantiations/fwd_hdim{128,192,256}_bf16_sm90.cu
# -DFLASHATTN_SM90_FWD_O_REGS, packed as .devc/v.tar.xz). The variant's Hopper forward tests
# (those head dims, packed and KV cases included) and racecheck, then the forward A/B d vs v.
# run(command="bash .devc/call36.sh 2>&1 | tee $OUT/call36.log", carry=[".devc"]), about 4 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
for x in d v; do [ -d .dev/$x ] || python3 -c "import tarfile; tarfile.open('.devc/$x.tar.xz').extractall('.dev')"; done
nvidia-smi --query-gpu=name --format=csv,noheader
T=.dev/v/flashattn_tests
tst fwd 200 8 $T --gtest_filter='Hopper/CudaForward*:HopperOtherDims/CudaForward*:CudaGraph*:Hopper/CudaKvCache*:SequsedK/*-*_f16_*' &
tst racecheck 200 4 compute-sanitizer --tool racecheck --error-exitcode 9 $T \
  --gtest_filter='Hopper/CudaForward*hdim128*:Hopper/CudaForward*hdim256*-*_f16_*' --gtest_brief=1 &
wait
echo "checks done at $((SECONDS - start)) s"
ROUNDS=2 timeout 150 bash scripts/gpu_ab_bench.sh .dev/d/libflashattn_bench_shim.so .dev/v/libflashattn_bench_shim.so \
  $OUT/ab --fwd-only --hdims 128,256 > $OUT/ab_o_regs.txt 2>&1
tail -25 $OUT/ab_o_regs.txt
pack
echo "all done at $((SECONDS - start)) s"
