#!/usr/bin/env bash
# A planned device call (session 38): the contract's grid beside cuDNN and FA2
# (bench_gpu.py, --warmup-ms 100) with f, main as prepare.sh builds it. On an H200 this
# is the run the issues' targets are read from (hd256's backward: 400 TFLOP/s).
# run(command="bash .devc/call12.sh 2>&1 | tee $OUT/call12.log", carry=[".devc"]), about 2 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
[ -d .dev/f ] || python3 -c "import tarfile; tarfile.open('.devc/f.tar.xz').extractall('.dev')"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
timeout 400 python3 bench/gpu/bench_gpu.py --shim .dev/f/libflashattn_bench_shim.so --warmup-ms 100 \
  --json $OUT/grid.json --png $OUT/grid.png 2>&1 | tee $OUT/grid.txt
echo "all done at $((SECONDS - start)) s"
