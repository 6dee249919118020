#!/usr/bin/env bash
# A planned device call (session 41; run twice: v5, then the review fixes): the decoding
# path with packed batches (cu_seqlens):
# the decoding, KV-cache and varlen cases (bf16), memcheck and racecheck on them, and the
# decoding benchmark once more (batched shapes: the same kernels).
# run(command="bash .devc/call26.sh 2>&1 | tee $OUT/call26.log", carry=[".devc"]), about 3 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
[ -d .dev/d ] || python3 -c "import tarfile; tarfile.open('.devc/d.tar.xz').extractall('.dev')"
nvidia-smi --query-gpu=name --format=csv,noheader
T=.dev/d/flashattn_tests
tst decode 200 4 $T --gtest_filter='*CudaDecode*:*CudaKvCache*:*Varlen*:*CudaForward*Lengths*:*CudaForward*Masks*:*CudaForward*Special*:*CudaBackward*Lengths*:CudaGraph*-*_f16_*'
S='*CudaDecode.*:*CudaKvCache*:*CudaForward*Varlen*-*_f16_*'
tst memcheck 200 4 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter="$S" --gtest_brief=1 &
tst racecheck 200 4 compute-sanitizer --tool racecheck --error-exitcode 9 $T --gtest_filter="$S" --gtest_brief=1 &
wait
grep -hE 'ERROR SUMMARY: [1-9]|RACECHECK SUMMARY: [1-9]|^\[  FAILED  \] [A-Za-z]' $logs/*.log | sort | uniq -c
timeout 60 python3 bench/gpu/bench_decode.py --shim .dev/d/libflashattn_bench_shim.so --sq 1 --no-tiled \
  --json $OUT/decode.json 2>&1 | tee $OUT/decode.txt
pack
echo "all done at $((SECONDS - start)) s"
