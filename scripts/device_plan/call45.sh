#!/usr/bin/env bash
# Session 44: sm90_tile_sweep over the other entries' switches (hd64 with late_p, hd192 /
# hd256 with q_desc_in_loop, hd128 176 keys with the long entry's), built on the v23
# branch (.devc/sweep45). Two runs. run(command="bash .devc/call45.sh 2>&1 | tee $OUT/call45.log", carry=[".devc"])
set -uo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
nvidia-smi --query-gpu=name --format=csv,noheader
for r in 1 2; do
  [ $((SECONDS - start)) -gt 200 ] && break
  timeout $((420 - (SECONDS - start))) .devc/sweep45 1024 2048 4096 8192 16384 > $OUT/sweep$r.txt 2>&1
  echo "run $r done at $((SECONDS - start)) s"
done
