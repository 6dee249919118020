#!/usr/bin/env bash
# Session 47: the few-tiles cut (B = 1, 4 heads of 128) measured 0.88x in call 53: calibrate.
# a = off, b = plan, c = forced 2, d = forced 4; N = 2k..16k, one sequence, two rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
E=.dev/e/libflashattn_bench_shim.so
[ -d .dev/e ] || python3 -c "import tarfile; tarfile.open('.devc/e.tar.xz').extractall('.dev')"
for n in 2048 4096 8192 16384; do
  ROUNDS=2 ENV_a=FLASHATTN_SM90_FWD_SPLIT=0 ENV_c=FLASHATTN_SM90_FWD_SPLIT=2 ENV_d=FLASHATTN_SM90_FWD_SPLIT=4 \
    timeout 100 bash scripts/gpu_ab_bench.sh $E $E,$E,$E $OUT/few_$n --fwd-only --causal 0 --hdims 128 \
    --seqlens $n --tokens $n --model-dim 512 > $OUT/few_$n.txt 2>&1
  tail -1 $OUT/few_$n.txt
done
