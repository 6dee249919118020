#!/usr/bin/env bash
# A planned device call (session 40, branch s39-cuda-seqused-k): the CUDA KV cache, now with
# paged caches (block_table) and new rows (k_new / v_new) on the sm80 forward and a copy
# kernel. kv = the branch's bf16 sm_90a build of head dim 128 (fp16 and larger head dims
# are filtered out: this build has no kernels for them) (tests + shim, from /tmp/bkv);
# f = main's shim (session 38's build) for the forced-sm80 forward A/B. The Python package
# with the CUDA backend is built here (hd128 bf16) beside the tests for its GPU KV test and
# the decoding-step benchmark.
# Packed by hand: .devk/{kv.tar.xz (from /tmp/bkv), f.tar.xz, lib.sh (copies of .devc's), cutlass.tar.xz
# (third_party/cutlass's include and dist-info)}.
# run(command="bash .devk/call16.sh 2>&1 | tee $OUT/call16.log", carry=[".devk"]), about 6 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
. .devk/lib.sh
start=$SECONDS
mkdir -p .dev third_party
for v in kv f; do [ -d .dev/$v ] || tar -xJf .devk/$v.tar.xz -C .dev; done
[ -d third_party/cutlass ] || tar -xJf .devk/cutlass.tar.xz -C third_party
nvidia-smi --query-gpu=name --format=csv,noheader
site=/tmp/pysite_gpu
( CMAKE_BUILD_PARALLEL_LEVEL=12 timeout 360 python3 -m pip install --quiet --no-build-isolation --no-deps --no-index \
    --target $site . --config-settings=cmake.define.FLASHATTN_WITH_CUDA=ON \
    --config-settings=cmake.define.FLASHATTN_CUDA_HEAD_DIMS=128 --config-settings=cmake.define.FLASHATTN_CUDA_DTYPES=bf16 \
    --config-settings=cmake.define.CMAKE_CUDA_ARCHITECTURES=90a-real > $logs/pip.log 2>&1
  echo "pip exit $? at $((SECONDS - start)) s" >> $logs/pip.log ) &
pip_pid=$!
tst kv_cases 150 4 .dev/kv/flashattn_tests --gtest_filter='*CudaKvCache*:Table/Refusal*:KvCache*-*_f16_*'
tst kv_fwd 200 4 .dev/kv/flashattn_tests --gtest_filter='*CudaForward*-*_f16_*:*hdim1[3-9]*:*hdim2*:*dqk192*:*dv192*:*dqk2*:*dv2*'
S='*CudaKvCache*-*_f16_*'
tst kv_memcheck 200 4 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/kv/flashattn_tests --gtest_filter="$S" --gtest_brief=1
tst kv_racecheck 200 4 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/kv/flashattn_tests --gtest_filter="$S" --gtest_brief=1
grep -hE 'ERROR SUMMARY: [1-9]|RACECHECK SUMMARY: [1-9]|^\[  FAILED  \] [A-Za-z]' $logs/kv_*.log | sort | uniq -c
echo "checks done at $((SECONDS - start)) s"
FLASHATTN_FORCE_SM80=1 ROUNDS=1 timeout 150 bash scripts/gpu_ab_bench.sh .dev/f/libflashattn_bench_shim.so \
  .dev/kv/libflashattn_bench_shim.so $OUT/ab --fwd-only --hdims 128 > $OUT/ab_sm80_fwd.txt 2>&1
tail -12 $OUT/ab_sm80_fwd.txt
echo "A/B done at $((SECONDS - start)) s"
wait $pip_pid; tail -3 $logs/pip.log
PYTHONPATH=$site timeout 120 python3 -m pytest -q -p no:cacheprovider tests/python_pkg/gpu -k kvcache 2>&1 | tail -15
cd bench/cpu
for p in 0 256; do
  PYTHONPATH=$site timeout 90 python3 bench_kvcache.py --device cuda --dtypes bf16 --repeats 20 --page $p \
    --json $OUT/kvcache_cuda_page$p.json 2>&1 | tail -6
done
cd ../..
pack
echo "all done at $((SECONDS - start)) s"
