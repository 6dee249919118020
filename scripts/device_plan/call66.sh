#!/usr/bin/env bash
# Session 49, for an H200 with little device time left: main's kernels (v.tar.xz) on the
# contract's grid, sides in turns with the order rotated, then capped (the README's method),
# then a second rotated run; the targets checked. About 3 minutes.
# run(command="bash .devc/call66.sh 2>&1 | tee $OUT/call66.log", carry=[".devc"], timeout_s=230).
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
S=.dev/v/libflashattn_bench_shim.so
start=$SECONDS
[ -d .dev/v ] || python3 -c "import tarfile; tarfile.open('.devc/v.tar.xz').extractall('.dev')"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
CAP=${CAP:-215}
grid rotate1 $S --interleave --rotate --rounds 6 --repeats 24
grid capped $S --warmup-ms 100
grid rotate2 $S --interleave --rotate --rounds 6 --repeats 24
for g in rotate1 capped rotate2; do [ -f $OUT/grid_$g.json ] && python3 bench/gpu/targets.py $OUT/grid_$g.json; done
echo "all done at $((SECONDS - start)) s"
