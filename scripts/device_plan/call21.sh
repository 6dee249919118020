#!/usr/bin/env bash
# A planned device call (session 41): the decoding path's v2 (d: each warp loads its own
# rows of the ring, no block barrier a tile; splits in whole waves; the merge launched
# programmatically) against v1 (d1, call19's build): its tests and sanitizers, then
# bench_decode.py for both builds and for v2's ring depths 2 and 4.
# run(command="bash .devc/call21.sh 2>&1 | tee $OUT/call21.log", carry=[".devc"]), about 4 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
for v in d d1; do [ -d .dev/$v ] || python3 -c "import tarfile; tarfile.open('.devc/$v.tar.xz').extractall('.dev')"; done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
T=.dev/d/flashattn_tests
tst decode 150 4 $T --gtest_filter='*CudaDecode*:*CudaKvCache*:*CudaForward*Masks*:CudaGraph*-*_f16_*'
S='*CudaDecode.*:*CudaKvCache*-*_f16_*'
tst memcheck 200 4 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter="$S" --gtest_brief=1 &
tst racecheck 200 4 compute-sanitizer --tool racecheck --error-exitcode 9 $T --gtest_filter="$S" --gtest_brief=1 &
wait
grep -hE 'ERROR SUMMARY: [1-9]|RACECHECK SUMMARY: [1-9]|^\[  FAILED  \] [A-Za-z]' $logs/*.log | sort | uniq -c
echo "checks done at $((SECONDS - start)) s"
B="python3 bench/gpu/bench_decode.py --sq 1,4"
timeout 100 $B --shim .dev/d/libflashattn_bench_shim.so --json $OUT/decode_v2.json 2>&1 | tee $OUT/decode_v2.txt
timeout 60 $B --shim .dev/d1/libflashattn_bench_shim.so --no-tiled --sq 1 --json $OUT/decode_v1.json 2>&1 | tee $OUT/decode_v1.txt
for st in 2 4; do
  echo "== stages $st"
  FLASHATTN_CUDA_DECODE_STAGES=$st timeout 60 $B --shim .dev/d/libflashattn_bench_shim.so --no-tiled --sq 1 \
    --json $OUT/decode_v2_stages$st.json 2>&1 | tee $OUT/decode_v2_stages$st.txt
done
pack
echo "all done at $((SECONDS - start)) s"
