#!/usr/bin/env bash
# A planned device call (prepare.sh copies it into .devc/ and builds what it reads):
# run(command="bash .devc/call2.sh 2>&1 | tee $OUT/call2.log", carry=[".devc"]), about 9 minutes.
# ncu of the hd128 16k forward beside cuDNN's (issue 5; SKIP_NCU=1 skips it),
# then the CPU host (issue 7): v17 A/B on bf16 decoding shapes, fp16 split against widened,
# the 1- and 16-thread scaling at N = 8192.
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
[ -d .dev/a ] || python3 -c "import tarfile; tarfile.open('.devc/bins.tar.xz').extractall('.dev')"
if [ -z "${SKIP_NCU:-}" ]; then
timeout 150 ncu --profile-from-start off --clock-control none -k 'regex:fwd_kernel|sm90|cudnn' \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
  --metrics 'regex:sm__inst_executed_pipe_.*\.avg\.pct_of_peak_sustained_active,regex:sm__pipe_.*_cycles_active\.avg\.pct_of_peak_sustained_active' \
  python3 bench/gpu/kernel_timeline.py .dev/a/libflashattn_bench_shim.so ncu 128:16384:0:1 > $OUT/ncu_fwd128.txt 2>&1
echo "ncu rc $? at $((SECONDS - start)) s"; grep -E "^  [a-zA-Z_].*\(|Duration|Compute \(SM\) Throughput|Issue Slots Busy|pipe_tensor|pipe_xu|pipe_fma |pipe_alu " $OUT/ncu_fwd128.txt | head -40
fi
lscpu | grep -E "Model name|^CPU\(s\)" | cut -c1-200
export LD_LIBRARY_PATH=$PWD/.devc/cpu
$PWD/.devc/cpu/flashattn info 2>&1 | grep -i "cpu\|isa" | head -5
# v17 A/B: bf16 decoding shapes with 32 / 64 rows per kv head (Sq 8 / 16, 32 heads on 8):
# A = main (K, V widened to fp32 on the decoding path), B = the tiled AMX forward (before v17)
mkdir -p $OUT/dec
for r in 1 2; do
  for v in flashattn flashattn_pre17; do
    for b in 1 8; do
      for sq in 8 16; do
        for n in 1024 4096 16384; do
          timeout 60 .devc/cpu/$v bench --backend cpu --dtype bf16 --hdim 128 --seqlens $n --seqlen-q $sq --kv-heads 8 \
            --model-dim 4096 --batch-tokens $((b * n)) --threads 16 --no-reference --repeats 7 \
            --json $OUT/dec/${v}_b${b}_q${sq}_n${n}_r$r.json > /dev/null 2>&1 || echo "dec $v $b $sq $n failed"
        done
      done
    done
  done
done
python3 - $OUT/dec <<'PY'
import glob, json, statistics, sys, collections
t = collections.defaultdict(list)
for f in glob.glob(sys.argv[1] + "/*.json"):
    v = f.rsplit("/", 1)[1].split("_b")[0]
    r = json.load(open(f))["rows"][0]
    t[(r["batch"], r["seqlen_q"], r["seqlen"], v)].append(r["flash_ms"])
for (b, sq, n, v) in sorted(k for k in t if k[3] == "flashattn"):
    a, bb = statistics.median(t[(b, sq, n, v)]), statistics.median(t.get((b, sq, n, "flashattn_pre17"), [float("nan")]))
    print(f"B={b} Sq={sq} N={n}: main {a:.2f} ms, pre-v17 {bb:.2f} ms, speed-up {bb / a:.2f}x")
PY
echo "decode A/B at $((SECONDS - start)) s"
export LD_LIBRARY_PATH=$PWD/.devc/cpu
fa=.devc/cpu/flashattn
mkdir -p $OUT/cli
for r in 1 2; do
  for v in default fp32; do
    for m in fwd bwd; do
      env $( [ $v = fp32 ] && echo FLASHATTN_CPU_F16=fp32 ) timeout 60 $fa bench --backend cpu --dtype f16 --hdim 64,128 --seqlens 2048,8192 \
        --batch-tokens 8192 --model-dim 1024 --mode $m --threads 16 --no-reference --repeats 3 --json $OUT/cli/f16_${v}_${m}_r$r.json > /dev/null 2>&1 || echo "f16 $v $m r$r failed"
    done
  done
done
echo "f16 A/B at $((SECONDS - start)) s"
for r in 1 2 3; do
  for t in 1 16; do
    for d in bf16 f32; do
      timeout 60 $fa bench --backend cpu --dtype $d --hdim 128 --seqlens 8192 --batch-tokens 8192 --model-dim 512 --mode fwd \
        --threads $t --no-reference --repeats 2 --json $OUT/cli/scal_${d}_fwd_t${t}_r$r.json > /dev/null 2>&1 || echo "scal $d fwd t$t failed"
      timeout 90 $fa bench --backend cpu --dtype $d --hdim 128 --seqlens 8192 --batch-tokens 8192 --model-dim 512 --mode bwd \
        --threads $t --no-reference --repeats 2 --json $OUT/cli/scal_${d}_bwd_t${t}_r$r.json > /dev/null 2>&1 || echo "scal $d bwd t$t failed"
    done
  done
  echo "scaling round $r at $((SECONDS - start)) s"
  [ $((SECONDS - start)) -gt 480 ] && break
done
tar -czf $OUT/cli.tar.gz -C $OUT cli dec && rm -rf $OUT/cli $OUT/dec
pack
echo "all done at $((SECONDS - start)) s"
