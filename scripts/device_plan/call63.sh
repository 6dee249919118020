#!/usr/bin/env bash
# Session 48: how the timing method moves the grid (main, v.tar.xz). On one machine: the sides of
# a point in turns with the order rotated each round (twice), each side after 300 ms idle (5
# warm-ups, median of 20, as peers.md), the fixed-order turns (a subset), and capped (100 ms).
# First a trace: 60 calls of each side from a rested GPU with the SM clock after each call
# (hd64 / hd128, 8k / 16k, no mask): each kernel's speed per clock from boost into the cap.
# GRIDS="..." runs a subset of the methods below.
# run(command="bash .devc/call63.sh 2>&1 | tee $OUT/call63.log", carry=[".devc"]).
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
S=.dev/v/libflashattn_bench_shim.so
start=$SECONDS
[ -d .dev/v ] || python3 -c "import tarfile; tarfile.open('.devc/v.tar.xz').extractall('.dev')"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
# The methods by name; GRIDS picks some, in its order (call66.sh: a short H200 run).
declare -A method=(
  [trace]="--trace 60 --idle-ms 1000 --hdims 64,128 --seqlens 8192,16384 --causal 0"
  [rotate1]="--interleave --rotate --rounds 6 --repeats 24"
  [idle]="--idle-ms 300"
  [capped]="--warmup-ms 100"
  [rotate2]="--interleave --rotate --rounds 6 --repeats 24"
  [fixed]="--interleave --seqlens 2048,8192,16384"
)
grids=${GRIDS:-trace rotate1 idle capped rotate2 fixed}
for g in $grids; do grid $g $S ${method[$g]}; done
for g in $grids; do [ -f $OUT/grid_$g.json ] && python3 bench/gpu/targets.py $OUT/grid_$g.json; done
echo "all done at $((SECONDS - start)) s"
