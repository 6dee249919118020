#!/usr/bin/env bash
# Nsight Compute profile of the sm80 kernels at hd128, N=16384 (one launch each):
# speed of light, warp stalls, occupancy, shared-memory conflicts.
# Usage (on the GPU machine): scripts/gpu_profile.sh CLI OUT_DIR
set -uo pipefail
cli=$1; out=$2
mkdir -p "$out"
ncu --clock-control none -k regex:'fwd_kernel|dkdv_kernel|dq_kernel' -c 3 \
  --section SpeedOfLight --section WarpStateStats --section Occupancy \
  --section MemoryWorkloadAnalysis_Tables --section LaunchStats \
  "$cli" bench --backend cuda --hdim 128 --seqlens 16384 --mode fwdbwd --warmup 0 --repeats 1 \
  > "$out/ncu_hd128_16k.txt" 2>&1
grep -E "fwd_kernel|dkdv_kernel|dq_kernel|Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Stall|Bank" \
  "$out/ncu_hd128_16k.txt" | head -60
