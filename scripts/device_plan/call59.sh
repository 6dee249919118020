#!/usr/bin/env bash
# Session 47: narrower key tiles for short causal calls (issue 5's N = 512 / 1024 causal
# forward at 0.92-0.97x cuDNN on the H100). .devc/s.tar.xz: bench/gpu/sm90_tile_sweep.cu
# built with -DSWEEP_SHORT_CAUSAL (no spills); two runs at N = 512 1024 2048, causal and not.
# run(command="bash .devc/call59.sh 2>&1 | tee $OUT/call59.log", carry=[".devc"]), ~2 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
rm -rf .dev/s; python3 -c "import tarfile; tarfile.open('.devc/s.tar.xz').extractall('.dev')"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for r in 1 2; do timeout 200 .dev/s/sm90_tile_sweep 512 1024 2048 | grep "causal=1" > $OUT/sweep$r.txt; done
paste -d'|' $OUT/sweep1.txt <(cut -c40-70 $OUT/sweep2.txt)
