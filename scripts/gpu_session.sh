#!/usr/bin/env bash
# One device call: GPU tests, compute-sanitizer on small cases, benchmark. Every
# step has its own time limit, so a hang costs that step, not the call.
# Usage (on the GPU machine): [STEPS="hopper_tests gpu_tests ..."] scripts/gpu_session.sh BIN_DIR OUT_DIR [bench args...]
# STEPS picks steps (default: all, in order; "bench" is the benchmark): the
# whole list takes longer than one 10-minute device call, so split it.
# BIN_DIR holds flashattn_tests, flashattn (the CLI) and libflashattn_bench_shim.so
# built for sm_90a. Logs go to OUT_DIR/logs.tar.gz, refreshed after every step (only
# about 8 files come back from a device call), the benchmark to OUT_DIR/bench.{json,png}.
set -uo pipefail
bin=$1; out=$2; shift 2
logs=$(mktemp -d)/logs
mkdir -p "$out" "$logs"
steps=" ${STEPS:-hopper_tests gpu_tests gpu_tests_sm80 gpu_tests_compact gpu_tests_standard cli_check gpu_large memcheck memcheck_sm80 memcheck_compact racecheck_sm80 racecheck_compact racecheck synccheck bench} "
# EXCLUDE: GoogleTest patterns left out of every test step, e.g. '*_f16_*:*hdim200*' in
# a build without fp16 or hd192 kernels (their cases fail there by design).
exclude=${EXCLUDE:+-$EXCLUDE}
shards=${SHARDS:-8}  # test steps run as this many GoogleTest shards at once: the
# float64 oracles are serial per case and dominate the suite's time, the GPU is idle.
step() {  # step NAME SECONDS COMMAND...: run with a limit in $shards shards, log, summarise
  local name=$1 limit=$2; shift 2
  [[ $steps == *" $name "* ]] || return 0
  echo "== $name"
  local i pids=()
  for ((i = 0; i < shards; i++)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i OMP_NUM_THREADS=$(( ($(nproc) + shards - 1) / shards )) \
      timeout "$limit" "$@" > "$logs/$name.$i.log" 2>&1 &
    pids+=($!)
  done
  for ((i = 0; i < shards; i++)); do
    wait "${pids[$i]}"
    local rc=$?
    [ $rc -eq 124 ] && echo "shard $i TIMED OUT after ${limit}s (last test started: $(grep '^\[ RUN' "$logs/$name.$i.log" | tail -1))"
    [ $rc -ne 0 ] && [ $rc -ne 124 ] && echo "shard $i exit $rc"
  done
  cat "$logs/$name".*.log > "$logs/$name.log" && rm "$logs/$name".*.log
  local passed
  passed=$(grep -hoE '^\[  PASSED  \] [0-9]+' "$logs/$name.log" | awk '{s += $4} END {print s + 0}')
  if [ "$passed" -gt 0 ]; then echo "passed: $passed tests in $shards shards"; else tail -2 "$logs/$name.log"; fi
  grep -hE '^\[  FAILED  \] [A-Za-z].*\(' "$logs/$name.log" | sort -u | head -20
  grep -hE "ERROR SUMMARY" "$logs/$name.log" | sort | uniq -c
  # Logs packed after every step: a call cut off by the device budget still returns them.
  tar -czf "$out/logs.tar.gz" -C "$(dirname "$logs")" logs
  return 0
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$logs/gpu.txt"
# Hopper cases first and alone: the newest kernels are the likeliest to hang.
step hopper_tests ${HOPPER_LIMIT:-300} "$bin/flashattn_tests" --gtest_filter='Hopper*/Cuda*:CudaDispatch.*'"$exclude"
step gpu_tests ${GPU_LIMIT:-250} "$bin/flashattn_tests" --gtest_filter='*Cuda*'"$exclude"
step gpu_tests_sm80 ${SM80_LIMIT:-200} env FLASHATTN_FORCE_SM80=1 "$bin/flashattn_tests" \
  --gtest_filter='*CudaForward*:*CudaBackward*:CudaGraph.*'"$exclude"
# The sm80 kernels of the smaller shared-memory tiers (kernels/sm80/tiles.h), which an
# H200 picks only on request: compact (RTX 30/40/50, L4, L40S: every backward, the
# hd256 forward, which the H200 also runs where rows see at most 8192 keys) and standard (A100:
# the hd256 backward; the H200's own tier, large, runs it with two Q/dO stages in
# gpu_tests_sm80). The compact backward kernels are built for sm_80 (and its PTX) only,
# so on an H200 the driver first compiles their PTX, as an RTX 50 would;
# FLASHATTN_SM80_COMPACT_ARCHITECTURES="80;90a-real" gives them sm_90a code.
step gpu_tests_compact ${SM80_LIMIT:-200} env FLASHATTN_FORCE_SM80=1 FLASHATTN_SM80_TILES=compact "$bin/flashattn_tests" \
  --gtest_filter='*CudaBackward*:*CudaForward*hdim256*:*CudaForward*hdim200*:CudaGraph.*'"$exclude"
# The standard tier's hd256 forward is also the one the large tier runs where rows
# see more than 8192 keys; the others go to the compact tiles there (dispatch.cpp).
step gpu_tests_standard ${SM80_LIMIT:-200} env FLASHATTN_FORCE_SM80=1 FLASHATTN_SM80_TILES=standard "$bin/flashattn_tests" \
  --gtest_filter='*CudaBackward*hdim256*:*CudaBackward*hdim200*:*CudaForward*hdim256*:*CudaForward*hdim200*'"$exclude"
shards=1 step cli_check 120 "$bin/flashattn" check --backend cuda --trials 300
shards=1 step gpu_large 200 env FLASHATTN_LARGE_TESTS=1 "$bin/flashattn_tests" --gtest_filter='CudaLarge.*'"$exclude"
step memcheck 180 compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/flashattn_tests" \
  --gtest_filter='HeadDims/Cuda*.*hdim64*:Varlen/Cuda*.*:Hopper/Cuda*.*hdim64*:Hopper/Cuda*.*long_keys*:CudaGraph.*'"$exclude" --gtest_brief=1
# The portable kernels on the same small cases (on an H200 dispatch picks the Hopper ones):
# partial tiles, odd lengths and packed batches exercise the zero-filled copies.
step memcheck_sm80 180 env FLASHATTN_FORCE_SM80=1 compute-sanitizer --tool memcheck --error-exitcode 9 \
  "$bin/flashattn_tests" --gtest_filter='HeadDims/Cuda*.*hdim64*:Varlen/Cuda*.*:Lengths/Cuda*.*:Masks/Cuda*.*'"$exclude" --gtest_brief=1
step memcheck_compact 180 env FLASHATTN_FORCE_SM80=1 FLASHATTN_SM80_TILES=compact compute-sanitizer --tool memcheck \
  --error-exitcode 9 "$bin/flashattn_tests" --gtest_filter='HeadDims/CudaBackward.*:Lengths/CudaBackward.*:HeadDims/CudaForward.*hdim256*'"$exclude" --gtest_brief=1
step racecheck_compact 180 env FLASHATTN_FORCE_SM80=1 FLASHATTN_SM80_TILES=compact compute-sanitizer --tool racecheck \
  --error-exitcode 9 "$bin/flashattn_tests" --gtest_filter='HeadDims/CudaBackward.*causal*:HeadDims/CudaForward.*hdim256_causal*'"$exclude" --gtest_brief=1
step racecheck_sm80 180 env FLASHATTN_FORCE_SM80=1 compute-sanitizer --tool racecheck --error-exitcode 9 \
  "$bin/flashattn_tests" --gtest_filter='HeadDims/Cuda*.*hdim128_causal*:Lengths/Cuda*.*'"$exclude" --gtest_brief=1
step racecheck 180 compute-sanitizer --tool racecheck --error-exitcode 9 "$bin/flashattn_tests" \
  --gtest_filter='HeadDims/Cuda*.*hdim128_causal*:Hopper/Cuda*.*hdim128_full_bf16*:Hopper/Cuda*.*hdim128_packed_causal*:Hopper/CudaForward.*long_keys_bf16*:Hopper/CudaForward.*long_keys_packed_bf16*:Hopper/CudaBackward.*hdim128_softcap_alibi_gqa_bf16*'"$exclude" --gtest_brief=1
step synccheck 180 compute-sanitizer --tool synccheck --error-exitcode 9 "$bin/flashattn_tests" \
  --gtest_filter='Hopper/Cuda*.*hdim128_causal*:Hopper/Cuda*.*hdim64_window*:Hopper/CudaForward.*long_keys*'"$exclude" --gtest_brief=1
[[ $steps == *" bench "* ]] && echo "== benchmark" &&
PYTHONUNBUFFERED=1 timeout ${BENCH_LIMIT:-400} python3 bench/gpu/bench_gpu.py --shim "$bin/libflashattn_bench_shim.so" \
  ${BENCH_FLAGS:---sm80-too --deterministic --memory} --json "$out/bench.json" --png "$out/bench.png" "$@" 2>&1 \
  | tee "$logs/bench.log" | tail -40
tar -czf "$out/logs.tar.gz" -C "$(dirname "$logs")" logs
