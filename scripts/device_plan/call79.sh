#!/usr/bin/env bash
# Session 53: where the short causal forward's time goes (issue 5's steadiest misses, N = 512
# causal 0.86-0.98x cuDNN), after v29 (the masked products cut) measured level: ncu at real
# clocks of one forward of each side (ours, cuDNN) at hd64 / hd128 / hd256 N = 512 causal and
# hd128 N = 16384 without a mask: instructions per pipe, issue activity, stall reasons, tensor
# pipe, occupancy. Main's build (.devc/v.tar.xz).
# run(command="bash .devc/call79.sh 2>&1 | tee $OUT/call79.log", carry=[".devc"], timeout_s=400)
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
unpack v
S=.dev/v/libflashattn_bench_shim.so
secs="--section SpeedOfLight --section SchedulerStats --section WarpStateStats --section InstructionStats
  --section LaunchStats --section Occupancy --section ComputeWorkloadAnalysis"
prob=${PROB:-128:512:1:1,64:512:1:1,256:512:1:1,128:16384:0:1}
# --print-details all: the stall reasons' chart as lines (an ncu without the option: plain).
prof() { timeout $((${CAP:-360} - (SECONDS - start))) ncu --profile-from-start off --clock-control none "$@" $secs \
  python3 bench/gpu/kernel_timeline.py $S ncu $prob > $OUT/ncu_short.txt 2>&1; }
if ! prof --print-details all && grep -q 'print-details' $OUT/ncu_short.txt; then prof; fi
echo "ncu rc $? at $((SECONDS - start)) s"
grep -E "^  [a-zA-Z_].*\(|Duration|Elapsed Cycles|Executed Instructions  |Issue Slots Busy|Issued Warp Per Scheduler|No Eligible|Active Warps Per Scheduler|Eligible Warps Per Scheduler|Warp Cycles Per Issued|Registers Per|Achieved Occupancy|Grid Size|Block Size|Compute \(SM\) Throughput|Executed Ipc Active|Stall" \
  $OUT/ncu_short.txt | cut -c1-150 | head -200
echo "all done at $((SECONDS - start)) s"
