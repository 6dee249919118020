#!/usr/bin/env bash
# Session 57, after call93 (v47 level on the capped A/B): p = branch s57-sm90-bwd-pair with
# every consumer thread arriving on its own block's empty barrier again (call93's racecheck
# flagged the LSE reads of lanes that only the warp's first lane's arrival covered). The
# pairs' tests, racecheck, then the long non-causal points with the order rotated against
# the peers (bench_gpu.py --interleave --rotate, call87's method), f and p in alternating
# processes, two rounds each: the condition v47 was predicted to help. On an H200, main's
# grid (call87) instead.
# run(command="bash .devc/call94.sh 2>&1 | tee $OUT/call94.log", carry=[".devc"], timeout_s=420)
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
# On an H200 main's grid instead (the issues' targets are H200 figures; none since session 50).
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  CAP=${GRID_CAP:-330} P=f bash .devc/call87.sh
  exit
fi
unpack f p
T=.dev/p/flashattn_tests
tst pairs 120 2 $T --gtest_filter='HopperPairs/CudaBackward*:Hopper/CudaBackward*hdim128_full*:Hopper/CudaBackward*hdim64_full*:Hopper/CudaBackward*large_scores_bf16*-*_f16_*:*hdim256*' &
tst racecheck 120 2 compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 9 $T \
  --gtest_filter='HopperPairs/CudaBackward*pair_ragged*:HopperPairs/CudaBackward*hdim128*many_steps*-*_f16_*' --gtest_brief=1 &
wait
grep -h "RACECHECK SUMMARY" $logs/racecheck.log
echo "tests done at $((SECONDS - start)) s"
for r in 1 2; do
  for v in f p; do
    timeout 120 python3 bench/gpu/bench_gpu.py --shim .dev/$v/libflashattn_bench_shim.so --interleave --rotate \
      --rounds 6 --repeats 24 --hdims 64,128 --causal 0 --seqlens 8192,16384 --json $OUT/rot_$v$r.json > $OUT/rot_$v$r.txt 2>&1
    echo "$v round $r at $((SECONDS - start)) s"
  done
done
python3 - $OUT <<'PY'
import json, sys, glob, statistics
out = sys.argv[1]
rows = {}
for f in sorted(glob.glob(f"{out}/rot_*.json")):
    v = f.rsplit("rot_", 1)[1][0]
    for r in json.load(open(f))["rows"]:
        k = (r["hdim"], r["seqlen"])
        rows.setdefault(k, {}).setdefault(v, []).append((r["ours_bwd_tflops"], r["cudnn_bwd_tflops"]))
for k, d in sorted(rows.items()):
    line = f"hd{k[0]} N={k[1]}:"
    for v, xs in sorted(d.items()):
        line += f"  {v}: ours {' '.join(f'{a:.0f}' for a, _ in xs)} cudnn {' '.join(f'{b:.0f}' for _, b in xs)} ratio {statistics.mean(a / b for a, b in xs):.3f}"
    print(line)
PY
pack
echo "all done at $((SECONDS - start)) s"
