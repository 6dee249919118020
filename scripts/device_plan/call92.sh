#!/usr/bin/env bash
# Session 56's last try, for whichever card comes: on an H200 main's grid (pack f, call87's
# capped and rotated runs in GRID_CAP seconds); on an H100 v33 at hd96 (pack o3, branch
# s56-sm90-fwd-lazy-hd96): its hd96 forward cases, memcheck, and the A/B against main's o,
# three rounds each way.
# run(command="bash .devc/call92.sh 2>&1 | tee $OUT/call92.log", carry=[".devc"], timeout_s=300)
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  CAP=${GRID_CAP:-270} P=f bash .devc/call87.sh
else
  unpack o o3
  tst other3 60 2 .dev/o3/flashattn_tests --gtest_filter='HopperOtherDims/CudaForward*hdim96*-*_f16_*' &
  tst memcheck3 60 1 compute-sanitizer --tool memcheck --error-exitcode 9 .dev/o3/flashattn_tests \
    --gtest_filter='HopperOtherDims/CudaForward*hdim96*large*-*_f16_*' --gtest_brief=1 &
  wait
  for r in 1 2; do
    if [ $r = 1 ]; then A=o B=o3; else A=o3 B=o; fi
    ROUNDS=3 bash scripts/gpu_ab_bench.sh .dev/$A/libflashattn_bench_shim.so .dev/$B/libflashattn_bench_shim.so \
      $OUT/ab --fwd-only --hdims 96 --seqlens 512,1024,2048,4096,8192,16384 > $OUT/ab$r.txt 2>&1
    echo "round $r: A=$A B=$B"; tail -n 13 $OUT/ab$r.txt; rm -rf $OUT/ab
  done
fi
pack
echo "all done at $((SECONDS - start)) s"
