#!/usr/bin/env bash
# A planned device call (session 38, for the next one): seqused_k on CUDA (kv: a build with
# -DFLASHATTN_CUDA_SEQUSED_K=ON, head dims 64 and 128; the sm80 forward kernels take it,
# the Hopper forward routes such calls to them). The KV-cache cases (CudaKvCache: NaN in
# every cache row past the used keys), memcheck / initcheck on them, the forward suites
# of kv (the define changes every kernel's SeqLen), then the cost for calls without
# seqused_k: the A/B f | kv at hd64 / hd128. If all pass and the A/B is within noise, the
# option's default becomes ON (src/CMakeLists.txt) and the README's feature row changes.
# `bash scripts/device_plan/prepare.sh` builds and packs f and kv.
# run(command="bash .devc/call14.sh 2>&1 | tee $OUT/call14.log", carry=[".devc"]), about 5 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
for v in f kv; do [ -d .dev/$v ] || python3 -c "import tarfile; tarfile.open('.devc/$v.tar.xz').extractall('.dev')"; done
nvidia-smi --query-gpu=name --format=csv,noheader
tst kv_cases 120 2 .dev/kv/flashattn_tests --gtest_filter='*KvCache*'
grep -hE 'SKIPPED|skipped' $logs/kv_cases.log | head -3
tst kv_memcheck 180 4 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/kv/flashattn_tests --gtest_filter='SequsedK/CudaKvCache*' --gtest_brief=1 &
tst kv_initcheck 180 4 compute-sanitizer --tool initcheck --error-exitcode 9 .dev/kv/flashattn_tests --gtest_filter='SequsedK/CudaKvCache*' --gtest_brief=1 &
wait
tst kv_forward 240 4 .dev/kv/flashattn_tests --gtest_filter='*CudaForward*:*Refusal*'
echo "checks done at $((SECONDS - start)) s"
grep -hE 'ERROR SUMMARY: [1-9]|^\[  FAILED  \] [A-Za-z]' $logs/kv_*.log | sort | uniq -c
ROUNDS=2 timeout 200 scripts/gpu_ab_bench.sh .dev/f/libflashattn_bench_shim.so .dev/kv/libflashattn_bench_shim.so \
  $OUT/abkv --hdims 64,128 --seqlens 1024,4096,16384 2>&1 | tee $OUT/abkv.txt
pack
echo "all done at $((SECONDS - start)) s"
