#!/usr/bin/env bash
# Session 53's plan for the next GPU session: where the short causal forward stalls, per SASS
# line. Call 79's ncu put our kernel at 0.78x cuDNN's kernel time at hd128 N = 512 causal
# (134 against 104 us), 0.81x at hd64, 0.82x at hd256, 0.89x at hd128 1024; the CPI gap (7.29
# against 5.88 at hd128) is long-scoreboard stalls (2.17 against 0.74 a instruction), where
# cuDNN's consumers wait on their pingpong barrier instead. This takes ncu's source counters
# (SASS lines with executed instructions and stall samples) of both kernels at hd64, hd128 and hd256
# N = 512 causal, forward alone, main's build (.devc/v.tar.xz), exported as source pages and
# compared by bench/gpu/ncu_source_compare.py; then the steady-state kernel times (kernel_timeline.py
# timeline) of the short causal calls. About 3 minutes.
# P=NAME profiles .devc/NAME.tar.xz instead of v.
# run(command="bash .devc/call80.sh 2>&1 | tee $OUT/call80.log", carry=[".devc"], timeout_s=400)
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
P=${P:-v}; unpack $P
S=.dev/$P/libflashattn_bench_shim.so
for d in 128 64 256; do
  for side in ours cudnn; do  # one report per kernel, so each exports as one source page
    k=fwd_kernel; [ $side = cudnn ] && k=flash_fprop
    timeout $((${CAP:-360} - (SECONDS - start))) ncu --profile-from-start off --clock-control none \
      -k "regex:$k" --launch-count 1 --section SourceCounters --section WarpStateStats -o /tmp/s${d}_$side -f \
      python3 bench/gpu/kernel_timeline.py $S ncu $d:512:1:1 > $OUT/ncu_s${d}_${side}_run.txt 2>&1
    tail -2 $OUT/ncu_s${d}_${side}_run.txt
    ncu -i /tmp/s${d}_$side.ncu-rep --page source --csv --print-source sass > /tmp/s${d}_$side.csv 2> $OUT/export_s${d}_$side.err
    xz -T4 -6 -c /tmp/s${d}_$side.csv > $OUT/s${d}_${side}_source.csv.xz
  done
  python3 bench/gpu/ncu_source_compare.py /tmp/s${d}_ours.csv /tmp/s${d}_cudnn.csv --top 30 2>&1 | tee $OUT/s${d}_summary.txt | head -80
  echo "hd$d done at $((SECONDS - start)) s"
done
# kernel times in the steady state beside the profiled ones (per kernel, real clocks)
timeout 90 python3 bench/gpu/kernel_timeline.py $S timeline 128:512:1:1,64:512:1:1,256:512:1:1,128:1024:1:1,64:1024:1:1 \
  2>&1 | tee $OUT/timeline_short.txt | grep -v Warning
echo "all done at $((SECONDS - start)) s"
