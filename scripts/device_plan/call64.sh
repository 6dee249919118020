#!/usr/bin/env bash
# Session 49: the CPU backward's prefetch of the next query tile (branch s49-cpu-bwd-prefetch,
# FLASHATTN_CPU_BWD_PREFETCH 0 off / 1 packs / 2 packs + dQ^T block) on the 16-core host: bf16
# backward at the scaling point (N = 8192, D = 128, 4 heads) at 1 and 16 threads, three rounds
# with the modes in turns; then fp32 and N = 2048 at 16 threads. .devc/cpu.tar.xz: the branch's
# CPU-only CLI (built here) and libfmt. About 90 s.
# run(command="bash .devc/call64.sh 2>&1 | tee $OUT/call64.log", carry=[".devc"]).
set -uo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
mkdir -p .dev && tar -xJf .devc/cpu.tar.xz -C .dev
export LD_LIBRARY_PATH=$PWD/.dev/cpu
B=.dev/cpu/flashattn
lscpu | grep -E "Model name|L2|L3|^CPU\(s\)"
bwd() {  # MODE THREADS DTYPE N
  FLASHATTN_CPU_BWD_PREFETCH=$1 timeout 60 $B bench --backend cpu --dtype $3 --hdim 128 --seqlens $4 \
    --batch-tokens 8192 --model-dim 512 --mode bwd --threads $2 --no-reference --warmup 1 --repeats 3 2>&1 \
    | grep -E " bwd " | sed "s/^/mode $1 threads $2 $3 /"
}
for r in 1 2 3; do
  for m in 0 1 2; do bwd $m 16 bf16 8192; bwd $m 1 bf16 8192; done
done
echo "scaling point done at $((SECONDS - start)) s"
for r in 1 2; do for m in 0 1 2; do bwd $m 16 f32 8192; bwd $m 16 bf16 2048; bwd $m 16 f32 2048; done; done
echo "all done at $((SECONDS - start)) s"
