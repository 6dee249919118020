#!/usr/bin/env bash
# A planned device call (session 39, branch s39-cuda-seqused-k): seqused_k on CUDA through
# the sm80 forward (kv = the branch's bf16 sm_90a build of head dim 128 only: cmake ...
# -DFLASHATTN_CUDA_HEAD_DIMS=128 into /tmp/bkv, tests and shim packed by hand into
# .devc/kv.tar.xz). The KV-cache cases (CudaKvCache: NaN in the unused rows), the forward
# suites up to head dim 128 as regressions, the refusal table, then memcheck / racecheck
# on the KV-cache cases.
# run(command="bash .devc/call15.sh 2>&1 | tee $OUT/call15.log", carry=[".devc"]), about 4 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
[ -d .dev/kv ] || python3 -c "import tarfile; tarfile.open('.devc/kv.tar.xz').extractall('.dev')"
nvidia-smi --query-gpu=name --format=csv,noheader
tst kv_cases 150 4 .dev/kv/flashattn_tests --gtest_filter='*CudaKvCache*:Table/Refusal*:KvCache*'
tst kv_fwd 200 4 .dev/kv/flashattn_tests --gtest_filter='*CudaForward*-*_f16_*:*hdim192*:*hdim256*:*hdim200*'
echo "checks done at $((SECONDS - start)) s"
S='*CudaKvCache*-*_f16_*'
tst kv_memcheck 150 4 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/kv/flashattn_tests --gtest_filter="$S" --gtest_brief=1
tst kv_racecheck 150 4 compute-sanitizer --tool racecheck --error-exitcode 9 .dev/kv/flashattn_tests --gtest_filter="$S" --gtest_brief=1
grep -hE 'ERROR SUMMARY: [1-9]|RACECHECK SUMMARY: [1-9]|^\[  FAILED  \] [A-Za-z]' $logs/kv_*.log | sort | uniq -c
pack
echo "all done at $((SECONDS - start)) s"
