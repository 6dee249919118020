#!/usr/bin/env bash
# Session 44: where the hd64 / hd128 non-causal backward loses its margin over cuDNN at
# N = 2048-8192 (1.04-1.05x, issue 6): per-kernel times (torch.profiler, power-capped state)
# and ncu of one fwd+bwd call of each side at hd64 N = 4096. Main's kernels (.devc/h.tar.xz: v23).
# run(command="bash .devc/call46.sh 2>&1 | tee $OUT/call46.log", carry=[".devc"])
set -uo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
[ -d .dev/h ] || python3 -c "import tarfile; tarfile.open('.devc/h.tar.xz').extractall('.dev')"
S=.dev/h/libflashattn_bench_shim.so
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 150 python3 bench/gpu/kernel_timeline.py $S timeline 64:2048:0,64:4096:0,64:16384:0,128:2048:0,128:8192:0,128:16384:0 > $OUT/timeline.txt 2>&1
echo "timeline rc $? at $((SECONDS - start)) s"
grep -vE "^\s*$" $OUT/timeline.txt | grep -E "^==|us/call" | awk '/^==/{print; n=0; next} {if (n++ < 5) print}' | cut -c1-150
timeout 200 ncu --profile-from-start off --clock-control none \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section MemoryWorkloadAnalysis \
  --section LaunchStats --section Occupancy \
  --metrics 'regex:sm__inst_executed_pipe_.*\.avg\.pct_of_peak_sustained_active,regex:sm__pipe_.*_cycles_active\.avg\.pct_of_peak_sustained_active' \
  python3 bench/gpu/kernel_timeline.py $S ncu 64:4096:0 > $OUT/ncu_bwd64_4k.txt 2>&1
echo "ncu rc $? at $((SECONDS - start)) s"
grep -E "^  [a-zA-Z_].*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|DRAM Throughput|Issue Slots Busy|pipe_tensor_op_gmma|Registers Per|Achieved Occupancy|Grid Size" $OUT/ncu_bwd64_4k.txt | cut -c1-150 | head -120
