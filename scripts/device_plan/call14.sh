#!/usr/bin/env bash
# A planned device call (session 39), the host CPU (issue 7): the Python package built
# there (CPU only, 16 cores), the KV-cache decoding step beside PyTorch's CPU SDPA
# (bench_kvcache.py, 16 threads, plain and paged), then the bf16 / fp32 16-thread
# scaling at N = 8192 with the CLI built here at HEAD (.devc/cpu/flashattn).
# run(command="bash .devc/call14.sh 2>&1 | tee $OUT/call14.log", carry=[".devc"]), about 8 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
lscpu | grep -E "Model name|^CPU\(s\)" | cut -c1-200
CMAKE_BUILD_PARALLEL_LEVEL=16 timeout 300 python3 -m pip install --quiet --no-build-isolation --no-deps --no-index --target /tmp/pysite . \
  --config-settings=cmake.define.FLASHATTN_WITH_CUDA=OFF > $logs/pip.log 2>&1 || { echo "pip failed"; tail -20 $logs/pip.log; }
echo "package built at $((SECONDS - start)) s"
cd bench/cpu
for p in 0 256; do
  PYTHONPATH=/tmp/pysite timeout 150 python3 bench_kvcache.py --threads 16 --repeats 5 --page $p \
    --json $OUT/kvcache_page$p.json 2>&1 | tail -12
  echo "kvcache page $p at $((SECONDS - start)) s"
done
cd ../..
export LD_LIBRARY_PATH=$PWD/.devc/cpu
fa=.devc/cpu/flashattn
mkdir -p $OUT/cli
for r in 1 2 3; do
  for t in 1 16; do
    for d in bf16 f32; do
      timeout 90 $fa bench --backend cpu --dtype $d --hdim 128 --seqlens 8192 --batch-tokens 8192 --model-dim 512 --mode bwd \
        --threads $t --no-reference --repeats 2 --json $OUT/cli/scal_${d}_bwd_t${t}_r$r.json > /dev/null 2>&1 || echo "scal $d bwd t$t failed"
    done
  done
  echo "scaling round $r at $((SECONDS - start)) s"
  [ $((SECONDS - start)) -gt 500 ] && break
done
python3 - $OUT/cli <<'PY'
import glob, json, sys, collections, statistics
t = collections.defaultdict(list)
for f in glob.glob(sys.argv[1] + "/*.json"):
    d, m, th, r = f.rsplit("/", 1)[1][5:-5].split("_")
    t[(d, th)].append(json.load(open(f))["rows"][0]["flash_ms"])
for d in ("bf16", "f32"):
    one, many = t.get((d, "t1"), []), t.get((d, "t16"), [])
    if one and many:
        print(f"{d} bwd N=8192: 1 thread {statistics.median(one):.1f} ms, 16 threads {[round(x, 1) for x in many]} ms,"
              f" scaling {statistics.median(one) / statistics.median(many):.2f}x (per round {[round(statistics.median(one) / x, 2) for x in many]})")
PY
tar -czf $OUT/cli.tar.gz -C $OUT cli && rm -rf $OUT/cli
pack
echo "all done at $((SECONDS - start)) s"
