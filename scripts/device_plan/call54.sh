#!/usr/bin/env bash
# Session 47: call53 (v24's tests, A = cuts off / B = the plan / C = main before v24, two
# rounds at hd64 / hd128) and, on an H200, the contract's grid on main (.devc/e.tar.xz)
# in the same call, so one machine start serves both (~6-8 minutes on an H200).
# run(command="bash .devc/call54.sh 2>&1 | tee $OUT/call54.log", carry=[".devc"], timeout_s=600).
set -uo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
HDIMS=64,128 ROUNDS=2 LIMIT=130 bash .devc/call52.sh
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
case "$gpu" in *H200*) ;; *) echo "not an H200: no grid"; exit 0;; esac
for r in 1 2; do
  left=$((570 - (SECONDS - start)))
  [ $left -lt 200 ] && break
  timeout $left python3 bench/gpu/bench_gpu.py --shim .dev/e/libflashattn_bench_shim.so --warmup-ms 100 \
    --json $OUT/grid$r.json --png $OUT/grid$r.png > $OUT/grid$r.txt 2>&1
  echo "grid round $r done at $((SECONDS - start)) s"; tail -3 $OUT/grid$r.txt
done
