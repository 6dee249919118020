#!/usr/bin/env bash
# A planned device call (session 37), right after call6.sh on the same machine: the
# contract's grid beside cuDNN and FA2 (bench_gpu.py, --warmup-ms 100) with the
# dQ-apart build h (prepare.sh).
# run(command="bash .devc/call7.sh 2>&1 | tee $OUT/call7.log", carry=[".devc"]), about 5 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
[ -d .dev/h ] || python3 -c "import tarfile; tarfile.open('.devc/h.tar.xz').extractall('.dev')"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
timeout 560 python3 bench/gpu/bench_gpu.py --shim .dev/h/libflashattn_bench_shim.so --warmup-ms 100 \
  --json $OUT/grid.json --png $OUT/grid.png 2>&1 | tee $OUT/grid.txt
echo "all done at $((SECONDS - start)) s"
