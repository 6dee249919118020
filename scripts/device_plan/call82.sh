#!/usr/bin/env bash
# Session 54's plan: sm90 forward v30b (branch s54-sm90-fwd-l2-sections-1k: call81's L2-sized
# sections only where seqlen_k <= 1024; call81 put v30 at +8% / +5% at hd128 N = 512 / 1024
# causal, +2.5% hd256 512, level or lower at 2048 / 4096). v = main (.devc/v.tar.xz), l2 = the
# branch (prepare.sh with PACK=l2 GPU_ONLY=1). The A/B of v and l2 (forward only), six rounds,
# N = 512 .. 2048 causal (2048 runs the same code in both: the A/B's noise); then the
# contract's grid of l2, capped and rotated (call63.sh's methods), the targets checked.
# run(command="bash .devc/call82.sh 2>&1 | tee $OUT/call82.log", carry=[".devc"], timeout_s=560)
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
unpack v l2
ROUNDS=${ROUNDS:-6} timeout 150 bash scripts/gpu_ab_bench.sh .dev/v/libflashattn_bench_shim.so \
  .dev/l2/libflashattn_bench_shim.so $OUT/ab_l2 --fwd-only --seqlens 512,1024,2048 --causal 1 > $OUT/ab_l2.txt 2>&1
tail -11 $OUT/ab_l2.txt
rm -rf $OUT/ab_l2
echo "A/B done at $((SECONDS - start)) s"
S=.dev/l2/libflashattn_bench_shim.so
CAP=${CAP:-540}
grid capped $S --warmup-ms 100
grid rotate1 $S --interleave --rotate --rounds 6 --repeats 24
for g in capped rotate1; do [ -f $OUT/grid_$g.json ] && python3 bench/gpu/targets.py $OUT/grid_$g.json; done
pack
echo "all done at $((SECONDS - start)) s"
