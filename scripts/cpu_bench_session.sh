#!/usr/bin/env bash
# The CPU backend's checks on a many-core host (the GPU machine's 16 cores):
# flash vs the float64 reference at N = 4096, peak extra memory at N = 32768, and
# (with PyTorch installed) flash vs PyTorch's CPU SDPA, bench/cpu/bench_cpu.py:
# issue 7's grid (fp32/bf16, D 64/128, N 1024-16384, causal and not) at THREADS
# threads (default 16, at most nproc), then the scaling, 1 thread vs THREADS at
# N = 8192. About 8 minutes at 16 threads.
# Usage: scripts/cpu_bench_session.sh BIN_DIR OUT_DIR
set -uo pipefail
bin=$1; out=$2
mkdir -p "$out"
threads=${THREADS:-16}
(( threads > $(nproc) )) && threads=$(nproc)
"$bin/flashattn" info 2>&1 | grep -i "cpu features"
# The tile products alone, operands in cache (bench/cpu/tile_scaling.cpp): the
# hardware's share of the thread scaling (AMX per core when every core runs it).
[ -x "$bin/flashattn_tile_scaling" ] && "$bin/flashattn_tile_scaling" --threads "1,2,4,8,$threads" \
  | tee "$out/tile_scaling.log"
"$bin/flashattn" bench --backend cpu --dtype f32 --hdim 128 --seqlens 4096 --batch-tokens 8192 \
  --model-dim 512 --both-masks --mode fwd --threads "$threads" --json "$out/cpu_bench_n4096.json" 2>&1 | tail -6
"$bin/flashattn" bench --backend cpu --dtype f32 --hdim 128 --seqlens 4096 --batch-tokens 8192 \
  --model-dim 512 --mode bwd --threads "$threads" --json "$out/cpu_bench_n4096_bwd.json" 2>&1 | tail -4
"$bin/flashattn" bench --backend cpu --dtype f32 --hdim 128 --seqlens 32768 --batch-tokens 32768 \
  --model-dim 256 --warmup 0 --repeats 1 --both-masks --mode fwdbwd --no-reference --threads "$threads" \
  --json "$out/cpu_bench_n32768.json" 2>&1 | tail -6
# flashattn's CPU backend beside PyTorch's CPU SDPA on the same threads (issue 7's
# comparison), when PyTorch is installed: the package is built CPU-only into the
# checkout (no network needed: scikit-build-core and nanobind preinstalled).
if python3 -c "import torch" 2>/dev/null; then
  site=$PWD/build/python/cpu-site
  python3 -m pip install --no-build-isolation --no-deps --no-index --upgrade --target "$site" . \
    --config-settings=cmake.define.FLASHATTN_WITH_CUDA=OFF > "$out/cpu_pip.log" 2>&1 \
    || { tail -20 "$out/cpu_pip.log"; exit 1; }
  # The grid: B*N = 8192 tokens (B = 1 from N = 8192 on), 8 heads, median of 2
  # after a warm-up (about 3 minutes at 16 threads; N = 16384 is two thirds of
  # it). Extra bench_cpu.py arguments in CPU_GRID_ARGS, e.g. "--heads 16".
  PYTHONPATH=$site python3 bench/cpu/bench_cpu.py --threads "$threads" --tokens 8192 --heads 8 \
    --repeats 2 ${CPU_GRID_ARGS:-} --json "$out/cpu_vs_torch.json" 2>&1 | tee "$out/cpu_vs_torch.log" | tail -45
  # Scaling at N = 8192 (B = 1, 4 heads, D = 128, not causal): 1 thread and all, interleaved
  # SCALING_RUNS times (default 3), median per point (this host's noise moves single runs).
  for ((r = 1; r <= ${SCALING_RUNS:-3}; r++)); do
    for t in 1 "$threads"; do
      PYTHONPATH=$site python3 bench/cpu/bench_cpu.py --threads "$t" --seqlens 8192 --hdims 128 --causal 0 \
        --heads 4 --tokens 8192 --repeats 2 --json "$out/cpu_scaling_t${t}_r$r.json" 2>&1 | tail -2
    done
  done
  python3 bench/cpu/scaling.py "$out"/cpu_scaling_t*_r*.json | tee "$out/cpu_scaling.log"
fi
