#!/usr/bin/env bash
# Session 51: issue 7's grid on the GPU machine's 16-core host with main's CPU backend: the
# Python package built there CPU-only, bench/cpu/bench_cpu.py beside PyTorch's CPU SDPA (16
# threads, fp32 / bf16, D 64 / 128, N 1024-16384, causal and not; 8 heads, B*N = 8192, median
# of 2), then the thread scaling at N = 8192 (B = 1, 4 heads, D = 128) with the CLI
# (.devc/cpu.tar.xz), forward and backward, fp32 and bf16, 16 and 1 threads in turns, three
# rounds. About 6 minutes.
# (Session 51's review: the summary is now bench/cpu/scaling.py's table, the same medians and
# fastest-run ratios the inline summary printed.)
# run(command="bash .devc/call73.sh 2>&1 | tee $OUT/call73.log", carry=[".devc"], timeout_s=560)
set -uo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
lscpu | grep -E "Model name|^CPU\(s\)|L2|L3|Flags" | cut -c1-120
CMAKE_BUILD_PARALLEL_LEVEL=16 timeout 240 python3 -m pip install --quiet --no-build-isolation --no-deps --no-index \
  --target /tmp/pysite . --config-settings=cmake.define.FLASHATTN_WITH_CUDA=OFF > /tmp/pip.log 2>&1 \
  || { echo "pip failed"; tail -20 /tmp/pip.log; }
echo "package built at $((SECONDS - start)) s"
PYTHONPATH=/tmp/pysite timeout 300 python3 bench/cpu/bench_cpu.py --threads 16 --tokens 8192 --heads 8 --repeats 2 \
  --json $OUT/cpu_vs_torch.json 2>&1 | tail -45
echo "grid done at $((SECONDS - start)) s"
mkdir -p .dev && tar -xJf .devc/cpu.tar.xz -C .dev
export LD_LIBRARY_PATH=$PWD/.dev/cpu
mkdir -p /tmp/cli
for r in 1 2 3; do
  for t in 16 1; do
    for d in bf16 f32; do
      for m in fwd bwd; do
        timeout 60 .dev/cpu/flashattn bench --backend cpu --dtype $d --hdim 128 --seqlens 8192 --batch-tokens 8192 \
          --model-dim 512 --mode $m --threads $t --no-reference --warmup 1 --repeats 2 \
          --json /tmp/cli/s_${d}_${m}_t${t}_r$r.json > /dev/null 2>&1 || echo "$d $m t$t failed"
      done
    done
  done
  echo "scaling round $r at $((SECONDS - start)) s"
  [ $((SECONDS - start)) -gt 470 ] && break
done
python3 bench/cpu/scaling.py /tmp/cli/*.json | tee $OUT/cpu_scaling.txt
echo "all done at $((SECONDS - start)) s"
