#!/usr/bin/env bash
# A planned device call (session 41): the decoding path's v3 (d: the merge reads its splits
# 8 at a time; rings up to 6 stages) against v2 (d2, call21's build), the ring depths 3-6,
# then the decoding tests and sanitizers on v3.
# run(command="bash .devc/call22.sh 2>&1 | tee $OUT/call22.log", carry=[".devc"]), about 3 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
for v in d d2; do [ -d .dev/$v ] || python3 -c "import tarfile; tarfile.open('.devc/$v.tar.xz').extractall('.dev')"; done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
B="python3 bench/gpu/bench_decode.py --sq 1 --no-tiled"
for st in 3 4 5 6; do
  for v in d2 d; do
    echo "== $v stages $st"
    FLASHATTN_CUDA_DECODE_STAGES=$st timeout 45 $B --shim .dev/$v/libflashattn_bench_shim.so \
      --json $OUT/decode_${v}_stages$st.json 2>&1 | tail -4
  done
done
echo "bench done at $((SECONDS - start)) s"
T=.dev/d/flashattn_tests
tst decode 150 4 $T --gtest_filter='*CudaDecode*:*CudaKvCache*:CudaGraph*-*_f16_*'
S='*CudaDecode.*:*CudaKvCache*-*_f16_*'
tst memcheck 200 4 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter="$S" --gtest_brief=1 &
tst racecheck 200 4 compute-sanitizer --tool racecheck --error-exitcode 9 $T --gtest_filter="$S" --gtest_brief=1 &
wait
grep -hE 'ERROR SUMMARY: [1-9]|RACECHECK SUMMARY: [1-9]|^\[  FAILED  \] [A-Za-z]' $logs/*.log | sort | uniq -c
pack
echo "all done at $((SECONDS - start)) s"
