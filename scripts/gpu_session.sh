#!/usr/bin/env bash
# One device call: GPU tests, compute-sanitizer on small cases, benchmark.
# Usage (on the GPU machine): scripts/gpu_session.sh BIN_DIR OUT_DIR [bench args...]
# BIN_DIR holds flashattn_tests, flashattn (the CLI) and libflashattn_bench_shim.so
# built for sm_90a.
set -uo pipefail
bin=$1; out=$2; shift 2
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$out/gpu.txt"
echo "== GPU tests"
"$bin/flashattn_tests" --gtest_filter='*Cuda*' --gtest_brief=1 2>&1 | tee "$out/gpu_tests.log" | tail -15
echo "== forward cases again on the portable kernel (the Hopper one is the default on H100/H200)"
FLASHATTN_FORCE_SM80=1 "$bin/flashattn_tests" --gtest_filter='*CudaForward*:CudaGraph.*' --gtest_brief=1 2>&1 \
  | tee "$out/gpu_tests_sm80.log" | tail -3
echo "== flashattn check on the GPU"
"$bin/flashattn" info
"$bin/flashattn" check --backend cuda --trials 300 2>&1 | tee "$out/cli_check.log" | tail -3
echo "== large tensors (2^31 elements each)"
FLASHATTN_LARGE_TESTS=1 "$bin/flashattn_tests" --gtest_filter='CudaLarge.*' 2>&1 | tee "$out/gpu_large.log" | tail -4
echo "== compute-sanitizer memcheck (small cases)"
compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/flashattn_tests" \
  --gtest_filter='HeadDims/Cuda*.*hdim64*:Varlen/Cuda*.*:CudaGraph.*' --gtest_brief=1 \
  > "$out/sanitizer_memcheck.log" 2>&1; echo "memcheck exit $?"; tail -4 "$out/sanitizer_memcheck.log"
echo "== compute-sanitizer racecheck"
compute-sanitizer --tool racecheck --error-exitcode 9 "$bin/flashattn_tests" \
  --gtest_filter='HeadDims/Cuda*.*hdim128_causal*:Masks/Cuda*.*causal*bf16*' --gtest_brief=1 \
  > "$out/sanitizer_racecheck.log" 2>&1; echo "racecheck exit $?"; tail -4 "$out/sanitizer_racecheck.log"
echo "== compute-sanitizer synccheck (Hopper forward: mbarriers, named barriers)"
compute-sanitizer --tool synccheck --error-exitcode 9 "$bin/flashattn_tests" \
  --gtest_filter='Hopper/CudaForward.*hdim128*:Hopper/CudaForward.*hdim64_window*' --gtest_brief=1 \
  > "$out/sanitizer_synccheck.log" 2>&1; echo "synccheck exit $?"; tail -4 "$out/sanitizer_synccheck.log"
echo "== benchmark"
PYTHONUNBUFFERED=1 python3 bench/gpu/bench_gpu.py --shim "$bin/libflashattn_bench_shim.so" \
  --sm80-too --deterministic --memory --json "$out/bench.json" --png "$out/bench.png" "$@" 2>&1 | tee "$out/bench.log"
