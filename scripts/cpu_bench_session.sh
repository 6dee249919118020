#!/usr/bin/env bash
# The CPU backend's checks on a many-core host (the GPU machine's 16 cores):
# flash vs the float64 reference at N = 4096, peak extra memory at N = 32768, and
# (with PyTorch installed) flash vs PyTorch's CPU SDPA, bench/cpu/bench_cpu.py.
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
# flashattn's CPU backend beside PyTorch's CPU SDPA on the same threads (issue 7's
# comparison), when PyTorch is installed: the package is built CPU-only into the
# checkout (no network needed: scikit-build-core and nanobind preinstalled).
if python3 -c "import torch" 2>/dev/null; then
  site=$PWD/build/python/cpu-site
  python3 -m pip install --no-build-isolation --no-deps --no-index --upgrade --target "$site" . \
    --config-settings=cmake.define.FLASHATTN_WITH_CUDA=OFF > "$out/cpu_pip.log" 2>&1 \
    || { tail -20 "$out/cpu_pip.log"; exit 1; }
  PYTHONPATH=$site python3 bench/cpu/bench_cpu.py --threads "${THREADS:-$(nproc)}" \
    --json "$out/cpu_vs_torch.json" 2>&1 | tee "$out/cpu_vs_torch.log" | tail -45
fi
