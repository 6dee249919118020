#!/usr/bin/env bash
# Session 54: main's grid with forward v30b again (.devc/l2.tar.xz: main's kernels; the
# switch removed on main changes no kernel), two more runs of each method (capped: each side
# alone after 100 ms of its own calls; rotated: the sides in turns, the order rotated each
# round), so the forward's short causal points (cuDNN's whole-call times there moved 15-25%
# between runs) rest on more than one run of each; the targets checked run by run and as
# medians over these runs and call 82's (bench/gpu/targets.py on all of them, here).
# run(command="bash .devc/call84.sh 2>&1 | tee $OUT/call84.log", carry=[".devc"], timeout_s=420)
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
CAP=${CAP:-400}
unpack l2
S=.dev/l2/libflashattn_bench_shim.so
grid capped2 $S --warmup-ms 100
grid rotate2 $S --interleave --rotate --rounds 6 --repeats 24
grid capped3 $S --warmup-ms 100
grid rotate3 $S --interleave --rotate --rounds 6 --repeats 24
for g in capped2 rotate2 capped3 rotate3; do [ -f $OUT/grid_$g.json ] && python3 bench/gpu/targets.py $OUT/grid_$g.json; done
pack
echo "all done at $((SECONDS - start)) s"
