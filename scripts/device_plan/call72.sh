#!/usr/bin/env bash
# Session 51, for an H200: issue 6's card. The contract's grid of main with v46 (.devc/v.tar.xz,
# bf16 build-sm90-f) three ways (rotated, capped, rotated; call63.sh's methods), the targets
# checked; then the host CPU (issue 7): the bf16 / fp32 backward at the scaling point (N = 8192,
# D = 128, 4 heads) at 1 and 16 threads, five rounds in turns, and the tile products alone
# (flashattn_tile_scaling: the host's own AMX / AVX512-BF16 / fp32 scaling, operands in cache).
# .devc/cpu.tar.xz: main's CPU-only CLI and tile_scaling (built here) with libfmt. ~5 minutes.
# (Session 51's review: the summary is now bench/cpu/scaling.py's table, the same medians and
# fastest-run ratios the inline summary printed.)
# run(command="bash .devc/call72.sh 2>&1 | tee $OUT/call72.log", carry=[".devc"], timeout_s=420)
set -uo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
CAP=200 GRIDS="rotate1 capped rotate2" bash .devc/call63.sh
echo "grids done at $((SECONDS - start)) s"
mkdir -p .dev && tar -xJf .devc/cpu.tar.xz -C .dev
export LD_LIBRARY_PATH=$PWD/.dev/cpu
lscpu | grep -E "Model name|^CPU\(s\)|L2|L3" | cut -c1-120
B=.dev/cpu/flashattn
mkdir -p /tmp/cli
for r in 1 2 3 4 5; do
  for t in 16 1; do
    for d in bf16 f32; do
      timeout 60 $B bench --backend cpu --dtype $d --hdim 128 --seqlens 8192 --batch-tokens 8192 --model-dim 512 --mode bwd \
        --threads $t --no-reference --warmup 1 --repeats 2 --json /tmp/cli/scal_${d}_bwd_t${t}_r$r.json > /dev/null 2>&1 || echo "scal $d t$t failed"
    done
  done
  echo "scaling round $r at $((SECONDS - start)) s"
  [ $((SECONDS - start)) -gt 360 ] && break
done
python3 bench/cpu/scaling.py /tmp/cli/*.json | tee $OUT/cpu_scaling.txt
timeout 60 .dev/cpu/flashattn_tile_scaling --threads 1,8,16 --seconds 1 | tee $OUT/tile_scaling.log
echo "all done at $((SECONDS - start)) s"
