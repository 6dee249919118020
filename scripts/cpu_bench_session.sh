#!/usr/bin/env bash
# The CPU backend's checks on a many-core host (the GPU machine's 16 cores):
# flash vs the float64 reference at N = 4096, and peak extra memory at N = 32768.
# Usage: scripts/cpu_bench_session.sh BIN_DIR OUT_DIR
set -uo pipefail
bin=$1; out=$2
mkdir -p "$out"
"$bin/flashattn" bench --backend cpu --dtype f32 --hdim 128 --seqlens 4096 --batch-tokens 8192 \
  --model-dim 512 --both-masks --mode fwd --json "$out/cpu_bench_n4096.json" 2>&1 | tail -6
"$bin/flashattn" bench --backend cpu --dtype f32 --hdim 128 --seqlens 4096 --batch-tokens 8192 \
  --model-dim 512 --mode bwd --json "$out/cpu_bench_n4096_bwd.json" 2>&1 | tail -4
"$bin/flashattn" bench --backend cpu --dtype f32 --hdim 128 --seqlens 32768 --batch-tokens 32768 \
  --model-dim 256 --warmup 0 --repeats 1 --both-masks --mode fwdbwd --no-reference \
  --json "$out/cpu_bench_n32768.json" 2>&1 | tail -6
