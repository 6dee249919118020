#!/usr/bin/env bash
# Session 55's plan, after call85: the contract's grid of pack P (l2 = main's kernels, g = v32
# where call85 put it ahead), capped then rotated (call63.sh's methods), the targets checked
# run by run. Meant first for an H200 (the issues' targets are H200 figures).
# run(command="P=l2 bash .devc/call87.sh 2>&1 | tee $OUT/call87.log", carry=[".devc"], timeout_s=330)
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
CAP=${CAP:-310}
P=${P:-l2}
[ -d .dev/$P ] || unpack $P
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
S=.dev/$P/libflashattn_bench_shim.so
grid capped $S --warmup-ms 100
grid rotate1 $S --interleave --rotate --rounds 6 --repeats 24
for g in capped rotate1; do [ -f $OUT/grid_$g.json ] && python3 bench/gpu/targets.py $OUT/grid_$g.json; done
pack
echo "all done at $((SECONDS - start)) s"
