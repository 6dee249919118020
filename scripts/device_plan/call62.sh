#!/usr/bin/env bash
# Session 48. (1) Branch s48-sm90-hd64-short-rows (.devc/v.tar.xz: main's build with hd64's forward
# recompiled): hd64 without a mask at N <= 1024 (queries and keys) on the 128-row blocks that short
# causal calls take. Its hd64 forward tests, then A/B against main (.devc/f.tar.xz), forward only,
# hd64, three rounds (2048: the same kernel both sides). (2) The contract's grid on main timed as
# peers.md timed the peers (5 warm-ups, median of 20): the sides of a point in turns; on an H200
# also each side on its own (peers.md's order), then capped (100 ms of calls first).
# run(command="bash .devc/call62.sh 2>&1 | tee $OUT/call62.log", carry=[".devc"]).
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
rm -rf .dev/f .dev/v
python3 -c "import tarfile; [tarfile.open(f'.devc/{n}.tar.xz').extractall('.dev') for n in 'fv']"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
tst v_hd64 100 4 .dev/v/flashattn_tests \
  --gtest_filter='Hopper/CudaForward*hdim64*:Lengths/CudaForward*:Layouts/CudaForward*:HopperSplit/*hdim64*:CudaGraph*-*_f16_*'
echo "tests done at $((SECONDS - start)) s"
ROUNDS=3 timeout 150 bash scripts/gpu_ab_bench.sh .dev/f/libflashattn_bench_shim.so .dev/v/libflashattn_bench_shim.so \
  $OUT/ab --fwd-only --hdims 64 --seqlens 512,1024,2048 > $OUT/ab_v48.txt 2>&1
tail -8 $OUT/ab_v48.txt; rm -rf $OUT/ab
echo "a/b done at $((SECONDS - start)) s"
grid() {  # name, extra args
  local left=$((${CAP:-575} - (SECONDS - start)))
  [ $left -lt 150 ] && { echo "no time for $1"; return; }
  timeout $left python3 bench/gpu/bench_gpu.py --shim .dev/f/libflashattn_bench_shim.so "${@:2}" \
    --json $OUT/grid_$1.json > /tmp/grid_$1.txt 2>&1
  echo "grid $1 done at $((SECONDS - start)) s"; cat /tmp/grid_$1.txt
}
grid interleaved --interleave --png $OUT/grid_interleaved.png
case "$gpu" in *H200*) ;; *) echo "not an H200: one grid"; exit 0;; esac
grid peers
grid capped --warmup-ms 100
