#!/usr/bin/env bash
# A planned device call (session 41): the CUDA decoding path (kernels/decode: split-KV,
# the query heads of a group in one block). d = main + the decoding path, bf16 sm_90a, head
# dims 64/128/192/256 (fp16 and hd96 cases skip: no kernels in this build). Tests against
# the reference (the decoding cases, every split count and the path off, the KV-cache
# suites, the forward suites that now route short query rows through it), memcheck and
# racecheck on the decoding cases, then bench/gpu/bench_decode.py beside FA2 and cuDNN.
# run(command="bash .devc/call19.sh 2>&1 | tee $OUT/call19.log", carry=[".devc"]), about 6 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
[ -d .dev/d ] || python3 -c "import tarfile; tarfile.open('.devc/d.tar.xz').extractall('.dev')"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
T=.dev/d/flashattn_tests
tst decode 150 4 $T --gtest_filter='*CudaDecode*:*CudaKvCache*-*_f16_*'
tst fwd 240 4 $T --gtest_filter='*CudaForward*:CudaGraph*:CudaErrors*-*_f16_*'
echo "checks done at $((SECONDS - start)) s"
S='*CudaDecode.*:*CudaKvCache*-*_f16_*'
tst memcheck 200 4 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter="$S" --gtest_brief=1 &
tst racecheck 200 4 compute-sanitizer --tool racecheck --error-exitcode 9 $T --gtest_filter="$S" --gtest_brief=1 &
wait
grep -hE 'ERROR SUMMARY: [1-9]|RACECHECK SUMMARY: [1-9]|^\[  FAILED  \] [A-Za-z]' $logs/*.log | sort | uniq -c
echo "sanitizers done at $((SECONDS - start)) s"
timeout 150 python3 bench/gpu/bench_decode.py --shim .dev/d/libflashattn_bench_shim.so --sq 1,4 \
  --json $OUT/decode.json 2>&1 | tee $OUT/decode.txt
pack
echo "all done at $((SECONDS - start)) s"
