#!/usr/bin/env bash
# A planned device call (session 41 prepared it; branch s41-sm90-fwd-seqused-k): the Hopper
# forward over a batched KV cache's used keys (kernel notes, sm90 forward v19). k = the
# branch's bf16 sm_90a build (head dims 64/128/192/256; `bash scripts/device_plan/prepare.sh`
# on the branch, then `mv .devc/d.tar.xz .devc/k.tar.xz` after renaming .dev/d to .dev/k;
# d = main's, from prepare.sh on main). Tests (the KV-cache suites, the Hopper forward
# suites), memcheck and racecheck on the new cases, then the plain forward's A/B against
# main (must read 0.99-1.01: the branch adds one runtime test a query tile).
# run(command="bash .devc/call30.sh 2>&1 | tee $OUT/call30.log", carry=[".devc"]), about 6 minutes.
# Session 42 ran it as call30.sh, with the wave probe at its end (16 against 33 heads).
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
for v in k d; do [ -d .dev/$v ] || python3 -c "import tarfile; tarfile.open('.devc/$v.tar.xz').extractall('.dev')"; done
nvidia-smi --query-gpu=name --format=csv,noheader
T=.dev/k/flashattn_tests
tst kv 150 4 $T --gtest_filter='*CudaKvCache*:*CudaDecode*-*_f16_*'
tst fwd 240 8 $T --gtest_filter='*CudaForward*-*_f16_*'
S='Hopper/CudaKvCache*-*_f16_*'
tst memcheck 150 4 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter="$S" --gtest_brief=1 &
tst racecheck 150 4 compute-sanitizer --tool racecheck --error-exitcode 9 $T --gtest_filter="$S" --gtest_brief=1 &
wait
grep -hE 'ERROR SUMMARY: [1-9]|RACECHECK SUMMARY: [1-9]|^\[  FAILED  \] [A-Za-z]' $logs/*.log | sort | uniq -c
echo "checks done at $((SECONDS - start)) s"
ROUNDS=2 timeout 200 bash scripts/gpu_ab_bench.sh .dev/d/libflashattn_bench_shim.so .dev/k/libflashattn_bench_shim.so \
  $OUT/ab --fwd-only --hdims 64,128,256 > $OUT/ab_fwd.txt 2>&1
tail -20 $OUT/ab_fwd.txt
pack
echo "all done at $((SECONDS - start)) s"
# Wave quantization probe: hd128 non-causal at 16 heads (2048 tiles of 128 rows: 15.5 waves
# on 132 SMs) and at 33 heads (4224 tiles: 32 whole waves), main's build.
for md in 2048 4224; do
  timeout 100 python3 bench/gpu/bench_gpu.py --shim .dev/d/libflashattn_bench_shim.so --warmup-ms 100 --fwd-only \
    --hdims 128 --seqlens 4096,16384 --causal 0 --model-dim $md > $OUT/waves_$md.txt 2>&1
  tail -4 $OUT/waves_$md.txt
done
echo "probe done at $((SECONDS - start)) s"
