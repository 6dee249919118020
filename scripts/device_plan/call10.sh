#!/usr/bin/env bash
# A planned device call (session 37): where the hd256 key-block kernel (dQ apart) stalls,
# per SASS line: ncu source counters of bwd_kernel at hd256 16k non-causal (f = main as
# landed, call 9's build), exported as the source page and summarised by
# bench/gpu/ncu_source_compare.py.
# run(command="bash .devc/call10.sh 2>&1 | tee $OUT/call10.log", carry=[".devc"]), about 2 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
[ -d .dev/f ] || python3 -c "import tarfile; tarfile.open('.devc/f.tar.xz').extractall('.dev')"
timeout 150 ncu --profile-from-start off --clock-control none -k 'regex:bwd_kernel' --launch-count 1 \
  --section SourceCounters --section WarpStateStats -o /tmp/kb256 -f \
  python3 bench/gpu/kernel_timeline.py .dev/f/libflashattn_bench_shim.so ncu 256:16384:0 > $OUT/ncu_run.txt 2>&1
tail -3 $OUT/ncu_run.txt
ncu -i /tmp/kb256.ncu-rep --page source --csv --print-source sass > /tmp/kb256.csv 2> $OUT/export_err.txt
xz -T4 -6 -c /tmp/kb256.csv > $OUT/kb256_source.csv.xz
python3 bench/gpu/ncu_source_compare.py /tmp/kb256.csv --top 25 2>&1 | tee $OUT/kb256_summary.txt | head -80
echo "all done at $((SECONDS - start)) s"
