#!/usr/bin/env bash
# Session 48: main's cut + graph tests (f.tar.xz), the short-causal tile sweep (s.tar.xz), then on
# an H200 the contract's grid. run(command="bash .devc/call60.sh 2>&1 | tee $OUT/call60.log", carry=[".devc"]).
set -uo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
rm -rf .dev/f .dev/s
python3 -c "import tarfile; tarfile.open('.devc/f.tar.xz').extractall('.dev'); tarfile.open('.devc/s.tar.xz').extractall('.dev')"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
OMP_NUM_THREADS=16 timeout 100 .dev/f/flashattn_tests --gtest_filter='HopperSplit/*bf16*:Sm90FwdSplit*:CudaGraph*' 2>&1 \
  | grep -E "^\[  (PASSED|FAILED) " 
echo "tests done at $((SECONDS - start)) s"
for r in 1 2; do timeout 150 .dev/s/sm90_tile_sweep 512 1024 2048 > $OUT/sweep$r.txt 2>&1; done
grep "causal=1" $OUT/sweep1.txt > $OUT/s1c.txt; grep "causal=1" $OUT/sweep2.txt > $OUT/s2c.txt
paste -d'|' $OUT/s1c.txt <(cut -c40-70 $OUT/s2c.txt)
echo "sweep done at $((SECONDS - start)) s"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
case "$gpu" in *H200*) ;; *) echo "not an H200: no grid"; exit 0;; esac
for r in 1 2; do
  left=$((${CAP:-570} - (SECONDS - start)))
  [ $left -lt 170 ] && break
  timeout $left python3 bench/gpu/bench_gpu.py --shim .dev/f/libflashattn_bench_shim.so --warmup-ms 100 \
    --json $OUT/grid$r.json --png $OUT/grid$r.png > $OUT/grid$r.txt 2>&1
  echo "grid round $r done at $((SECONDS - start)) s"; tail -3 $OUT/grid$r.txt
done
