#!/usr/bin/env bash
# A device call of session 42 (call23.sh of session 41, the grid only on an H200): the decoding path as it lands (d) -
# its tests and sanitizers, bench_decode.py beside FA2 and cuDNN - then the contract's grid
# (bench_gpu.py, --warmup-ms 100) twice: main's Hopper kernels with v41, whose shapes never
# take the decoding path. The issues' ratios move by a few percent between runs.
# run(command="bash .devc/call23.sh 2>&1 | tee $OUT/call23.log", carry=[".devc"]), about 8 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
[ -d .dev/d ] || python3 -c "import tarfile; tarfile.open('.devc/d.tar.xz').extractall('.dev')"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
T=.dev/d/flashattn_tests
tst decode 150 4 $T --gtest_filter='*CudaDecode*:*CudaKvCache*:CudaGraph*:*CudaForward*Lengths*-*_f16_*'
S='*CudaDecode.*:*CudaKvCache*-*_f16_*'
tst memcheck 200 4 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter="$S" --gtest_brief=1 &
tst racecheck 200 4 compute-sanitizer --tool racecheck --error-exitcode 9 $T --gtest_filter="$S" --gtest_brief=1 &
wait
grep -hE 'ERROR SUMMARY: [1-9]|RACECHECK SUMMARY: [1-9]|^\[  FAILED  \] [A-Za-z]' $logs/*.log | sort | uniq -c
timeout 100 python3 bench/gpu/bench_decode.py --shim .dev/d/libflashattn_bench_shim.so --sq 1,4 \
  --json $OUT/decode.json 2>&1 | tee $OUT/decode.txt
pack
echo "decoding done at $((SECONDS - start)) s"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
case "$gpu" in *H200*) rounds="1 2";; *) rounds=""; echo "not an H200: no grid";; esac
for r in $rounds; do
  [ $((SECONDS - start)) -gt 330 ] && break
  timeout 240 python3 bench/gpu/bench_gpu.py --shim .dev/d/libflashattn_bench_shim.so --warmup-ms 100 \
    --json $OUT/grid$r.json --png $OUT/grid$r.png > $OUT/grid$r.txt 2>&1
  echo "grid round $r done at $((SECONDS - start)) s"
done
