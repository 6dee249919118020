#!/usr/bin/env bash
# Session 43: the contract's grid on v23 (h, or main once it landed: d) beside FA2 and cuDNN, for issues 5 / 6 (H200 only).
# Prepared in session 43; run(command="bash .devc/call44.sh 2>&1 | tee $OUT/call44.log", carry=[".devc"], kind="nvidia-h200").
# B=d for main's build. About 5 minutes on an H200; exits at once on other cards.
set -uo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
B=${B:-h}; [ -d .dev/$B ] || python3 -c "import tarfile; tarfile.open('.devc/$B.tar.xz').extractall('.dev')"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$gpu"
case "$gpu" in *H200*) ;; *) echo "not an H200: no grid"; exit 0;; esac
for r in 1 2; do
  [ $((SECONDS - start)) -gt 120 ] && break
  timeout 200 python3 bench/gpu/bench_gpu.py --shim .dev/$B/libflashattn_bench_shim.so --warmup-ms 100 \
    --json $OUT/grid$r.json --png $OUT/grid$r.png > $OUT/grid$r.txt 2>&1
  echo "grid round $r done at $((SECONDS - start)) s"; tail -3 $OUT/grid$r.txt
done
