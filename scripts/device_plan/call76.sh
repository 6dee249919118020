#!/usr/bin/env bash
# Session 51, the last device seconds: call 75's hd128 rows again (v27 against v26, forward
# only), three rounds, N = 1k / 4k / 8k / 16k, causal and not: is 128 x 128's loss (1k / 4k)
# and 128 x 192's gain (16k) real? .devc/x.tar.xz = main with v26, .devc/y.tar.xz = v27.
# run(command="bash .devc/call76.sh 2>&1 | tee $OUT/call76.log", carry=[".devc"], timeout_s=170)
set -uo pipefail
cd "$(dirname "$0")/.."
rm -rf .dev/x .dev/y; python3 -c "import tarfile; [tarfile.open(f'.devc/{n}.tar.xz').extractall('.dev') for n in 'xy']"
nvidia-smi --query-gpu=name --format=csv,noheader
ROUNDS=3 timeout 150 bash scripts/gpu_ab_bench.sh .dev/x/libflashattn_bench_shim.so .dev/y/libflashattn_bench_shim.so \
  /tmp/ab_y2 --fwd-only --hdims 128 --seqlens 1024,4096,8192,16384 > $OUT/ab_y2.txt 2>&1
tail -12 $OUT/ab_y2.txt
