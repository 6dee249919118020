#!/usr/bin/env bash
# Session 48: the contract's grid on main (f.tar.xz) timed the way peers.md measured the peers
# (5 warm-ups, median of 20, CUDA events): first with each point's sides in turns (--interleave,
# one clock state for all), then each side on its own as peers.md did, then capped (100 ms).
# run(command="bash .devc/call61.sh 2>&1 | tee $OUT/call61.log", carry=[".devc"]).
set -uo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
rm -rf .dev/f; python3 -c "import tarfile; tarfile.open('.devc/f.tar.xz').extractall('.dev')"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
grid() {  # name, extra args
  local left=$((${CAP:-575} - (SECONDS - start)))
  [ $left -lt 150 ] && { echo "no time for $1"; return; }
  timeout $left python3 bench/gpu/bench_gpu.py --shim .dev/f/libflashattn_bench_shim.so "${@:2}" \
    --json $OUT/grid_$1.json --png $OUT/grid_$1.png > $OUT/grid_$1.txt 2>&1
  echo "grid $1 done at $((SECONDS - start)) s"
}
grid interleaved --interleave
case "$gpu" in *H200*) ;; *) echo "not an H200: one grid"; exit 0;; esac
grid peers
grid capped --warmup-ms 100
