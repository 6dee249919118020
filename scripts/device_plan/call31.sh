#!/usr/bin/env bash
# Session 42: the Hopper forward's balanced tail (b = main + the tail, bf16 sm_90a; d = main
# before it). Tests, sanitizers, SASS spill sites, A/B (d vs b; b off vs on).
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
for v in b d; do [ -d .dev/$v ] || python3 -c "import tarfile; tarfile.open('.devc/$v.tar.xz').extractall('.dev')"; done
nvidia-smi --query-gpu=name --format=csv,noheader
T=.dev/b/flashattn_tests
tst fwd 200 8 $T --gtest_filter='*CudaForward*:CudaGraph*:*CudaKvCache*:*CudaDecode*-*_f16_*'
S='BalancedTail/*:CudaGraph.Balanced*'
tst memcheck 200 4 compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter="$S" --gtest_brief=1 &
tst racecheck 200 4 compute-sanitizer --tool racecheck --error-exitcode 9 $T --gtest_filter="$S" --gtest_brief=1 &
wait
echo "checks done at $((SECONDS - start)) s"
# Where the spills sit: SASS of the hd128 / hd256 forward kernels, STL / LDL with context.
cuobjdump -sass .dev/b/libflashattn_bench_shim.so > /tmp/all.sass 2>/dev/null
python3 - <<'PY' > $OUT/spills.txt
import re
lines = open('/tmp/all.sass').read().split('\n')
fn = None; out = []
for i, l in enumerate(lines):
    m = re.search(r'Function : (\S+)', l)
    if m: fn = m.group(1); continue
    if fn and 'fwd_kernel' in fn and ('ILi128E' in fn or 'ILi256E' in fn) and re.search(r'\b(STL|LDL)', l):
        out.append((fn, i))
seen = {}
for fn, i in out: seen.setdefault(fn, []).append(i)
for fn, idx in seen.items():
    print('=====', fn, len(idx), 'spill instructions')
    last = -100
    for i in idx:
        if i - last > 12: print('-----')
        for j in range(max(i - 6, last + 7), i + 7): print(lines[j])
        last = i
PY
wc -l $OUT/spills.txt; grep "=====" $OUT/spills.txt
pack
ROUNDS=2 timeout 150 bash scripts/gpu_ab_bench.sh .dev/d/libflashattn_bench_shim.so .dev/b/libflashattn_bench_shim.so \
  $OUT/ab1 --fwd-only --hdims 64,128,256 > $OUT/ab_d_vs_b.txt 2>&1
tail -37 $OUT/ab_d_vs_b.txt
A_ENV=FLASHATTN_SM90_FWD_BALANCE=0 ROUNDS=2 timeout 150 bash scripts/gpu_ab_bench.sh .dev/b/libflashattn_bench_shim.so \
  .dev/b/libflashattn_bench_shim.so $OUT/ab2 --fwd-only --hdims 64,128,256 --causal 0 > $OUT/ab_off_vs_on.txt 2>&1
tail -19 $OUT/ab_off_vs_on.txt
echo "ab done at $((SECONDS - start)) s"
pack
echo "all done at $((SECONDS - start)) s"
