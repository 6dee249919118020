#!/usr/bin/env bash
# Session 47: main with the plan's 20% threshold (.devc/f.tar.xz, bf16): the cut and graph
# tests, then on an H200 the contract's grid beside FA2 and cuDNN (issues 5 / 6).
# run(command="bash .devc/call58.sh 2>&1 | tee $OUT/call58.log", carry=[".devc"], timeout_s=600).
set -uo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
rm -rf .dev/f; python3 -c "import tarfile; tarfile.open('.devc/f.tar.xz').extractall('.dev')"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
OMP_NUM_THREADS=16 timeout 100 .dev/f/flashattn_tests --gtest_filter='HopperSplit/*bf16*:Sm90FwdSplit*:CudaGraph*' 2>&1 \
  | grep -E "^\[  (PASSED|FAILED) |^\[       OK" | sed 's/MatchesReference\///'
echo "tests done at $((SECONDS - start)) s"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
case "$gpu" in *H200*) ;; *) echo "not an H200: no grid"; exit 0;; esac
for r in 1 2; do
  left=$((${CAP:-380} - (SECONDS - start)))
  [ $left -lt 180 ] && break
  timeout $left python3 bench/gpu/bench_gpu.py --shim .dev/f/libflashattn_bench_shim.so --warmup-ms 100 \
    --json $OUT/grid$r.json --png $OUT/grid$r.png > $OUT/grid$r.txt 2>&1
  echo "grid round $r done at $((SECONDS - start)) s"; tail -3 $OUT/grid$r.txt
done
