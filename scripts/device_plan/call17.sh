#!/usr/bin/env bash
# A planned device call (session 40): where the hd128 backward (issue 6's last gap) and the
# hd128 forward (issue 5's) stall, per SASS line: ncu source counters of the sm90 backward
# kernel and of the forward kernel at hd128 16k non-causal (f = main's Hopper build), exported
# as source pages and summarised by bench/gpu/ncu_source_compare.py, as call10 did for hd256.
# run(command="bash .devc/call17.sh 2>&1 | tee $OUT/call17.log", carry=[".devc"]), about 4 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
[ -d .dev/f ] || python3 -c "import tarfile; tarfile.open('.devc/f.tar.xz').extractall('.dev')"
nvidia-smi --query-gpu=name --format=csv,noheader
for k in bwd fwd; do
  prob=128:16384:0; [ $k = fwd ] && prob=128:16384:0:1  # the forward alone
  timeout 170 ncu --profile-from-start off --clock-control none -k "regex:${k}_kernel" --launch-count 1 \
    --section SourceCounters --section WarpStateStats -o /tmp/${k}128 -f \
    python3 bench/gpu/kernel_timeline.py .dev/f/libflashattn_bench_shim.so ncu $prob > $OUT/ncu_${k}_run.txt 2>&1
  tail -3 $OUT/ncu_${k}_run.txt
  ncu -i /tmp/${k}128.ncu-rep --page source --csv --print-source sass > /tmp/${k}128.csv 2> $OUT/export_${k}_err.txt
  xz -T4 -6 -c /tmp/${k}128.csv > $OUT/${k}128_source.csv.xz
  python3 bench/gpu/ncu_source_compare.py /tmp/${k}128.csv --top 25 2>&1 | tee $OUT/${k}128_summary.txt | head -45
  echo "$k done at $((SECONDS - start)) s"
done
echo "all done at $((SECONDS - start)) s"
