#!/usr/bin/env bash
# Session 50: on an H200, call63.sh's six timing methods (main since v25, v.tar.xz); on any card
# then ncu at real clocks (--clock-control none) of one hd128 N = 16384 non-causal fwd+bwd call
# of each side: instructions, shared-memory wavefronts, L2 / DRAM bytes, tensor-pipe activity
# per kernel, so the work per FLOP of our backward stands beside cuDNN's.
# run(command="bash .devc/call67.sh 2>&1 | tee $OUT/call67.log", carry=[".devc"], timeout_s=590)
set -uo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "$gpu"
if [[ $gpu == *H200* ]]; then
  CAP=${CAP:-380} bash .devc/call63.sh
else
  [ -d .dev/v ] || python3 -c "import tarfile; tarfile.open('.devc/v.tar.xz').extractall('.dev')"
fi
S=.dev/v/libflashattn_bench_shim.so
m=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,smsp__inst_executed.sum,sm__inst_executed_pipe_fma.sum
m=$m,sm__inst_executed_pipe_alu.sum,sm__inst_executed_pipe_xu.sum,sm__inst_executed_pipe_lsu.sum,sm__inst_executed_pipe_uniform.sum
m=$m,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum
m=$m,lts__t_bytes.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_red.sum,smsp__cycles_active.sum
m=$m,launch__registers_per_thread,launch__grid_size,launch__block_size,sm__warps_active.avg.pct_of_peak_sustained_active
safe=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,smsp__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,lts__t_sectors_op_red.sum
timeout $((560 - (SECONDS - start))) ncu --profile-from-start off --clock-control none --metrics "$m" --csv \
  python3 bench/gpu/kernel_timeline.py $S ncu 128:16384:0,64:16384:0 > $OUT/ncu_16k.csv 2> $OUT/ncu_16k.err
rc=$?; echo "ncu rc $rc at $((SECONDS - start)) s"; tail -3 $OUT/ncu_16k.err
if [ $rc -ne 0 ] && grep -qi metric $OUT/ncu_16k.err; then  # a name this ncu lacks: the safe few
  timeout $((560 - (SECONDS - start))) ncu --profile-from-start off --clock-control none --metrics "$safe" --csv \
    python3 bench/gpu/kernel_timeline.py $S ncu 128:16384:0,64:16384:0 > $OUT/ncu_16k.csv 2> $OUT/ncu_16k.err
  echo "ncu (safe metrics) rc $? at $((SECONDS - start)) s"
fi
python3 - $OUT/ncu_16k.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; ik, im, iv = hdr.index("Kernel Name"), hdr.index("Metric Name"), hdr.index("Metric Value")
iid = hdr.index("ID")
k = collections.OrderedDict()
for r in rows[1:]:
    k.setdefault((r[iid], r[ik][:60]), {})[r[im]] = r[iv]
for (i, name), d in k.items():
    print(f"[{i}] {name}")
    for mm, v in d.items(): print(f"     {mm:70s} {v}")
PY
echo "all done at $((SECONDS - start)) s"
