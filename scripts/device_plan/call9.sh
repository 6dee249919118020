#!/usr/bin/env bash
# A planned device call (session 37) on f = build-sm90-h as landed: dQ apart on by
# default, the dQ kernel's split K / V ring (v36) and its programmatic launch (v35);
# the launch chain of v37 taken out again. Tests and the three sanitizers of the
# hd192 / hd256 backward (packed, GQA, long keys, deterministic, graphs), then the
# contract's grid beside cuDNN and FA2; ncu warp states of the hd256 16k kernels.
# run(command="bash .devc/call9.sh 2>&1 | tee $OUT/call9.log", carry=[".devc"]), about 5 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
python3 -c "import tarfile; tarfile.open('.devc/f.tar.xz').extractall('.dev')"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
S='Hopper256/CudaBackward.*:Hopper/CudaBackward.*hdim256*-*_f16_*:*long_keys_lookahead*'
tst f_racecheck 150 4 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/f/flashattn_tests --gtest_filter="$S" --gtest_brief=1 &
tst f_synccheck 150 4 compute-sanitizer --tool synccheck --error-exitcode 9 .dev/f/flashattn_tests --gtest_filter="$S" --gtest_brief=1 &
wait
tst f_memcheck 150 4 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/f/flashattn_tests --gtest_filter="$S" --gtest_brief=1 &
tst f_bwd 150 4 .dev/f/flashattn_tests --gtest_filter='*CudaBackward*hdim256*:*CudaBackward*hdim192*:Hopper256/*:CudaDeterministic*:*Graph*-*_f16_*'
wait
echo "checks done at $((SECONDS - start)) s"
grep -hE 'ERROR SUMMARY: [1-9]|RACECHECK SUMMARY: [1-9]|^\[  FAILED  \] [A-Za-z]' $logs/f_*.log | sort | uniq -c
timeout 200 python3 bench/gpu/bench_gpu.py --shim .dev/f/libflashattn_bench_shim.so --warmup-ms 100 \
  --json $OUT/grid.json --png $OUT/grid.png 2>&1 | tee $OUT/grid.txt
# Where the dQ kernel and the key-block kernel wait now (issue 6's next lever).
timeout 100 ncu --profile-from-start off --clock-control none -k 'regex:bwd_kernel|dq_kernel' \
  --section SpeedOfLight --section WarpStateStats --metrics sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active \
  python3 bench/gpu/kernel_timeline.py .dev/f/libflashattn_bench_shim.so ncu 256:16384:0 > $OUT/ncu_f256.txt 2>&1
grep -E "^  [a-zA-Z_].*\(|Duration|tensor_cycles|Stall|Warp Cycles" $OUT/ncu_f256.txt | cut -c1-160 | head -40
pack
echo "all done at $((SECONDS - start)) s"
