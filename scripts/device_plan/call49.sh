#!/usr/bin/env bash
# Session 45: v43's cut wave, checked and timed three ways at hd64 (the only head dim the
# contract's grid cuts): A = main (.devc/h.tar.xz), B = this build (.devc/d.tar.xz), C = this
# build with FLASHATTN_SM90_BWD_TAIL=0 (the code change without the cut), four rounds.
# run(command="bash .devc/call49.sh 2>&1 | tee $OUT/call49.log", carry=[".devc"]), ~4 minutes.
# FILTER replaces the tests' filter (call50.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
. .devc/lib.sh
start=$SECONDS
rm -rf .dev/d; python3 -c "import tarfile; tarfile.open('.devc/d.tar.xz').extractall('.dev')"
[ -d .dev/h ] || python3 -c "import tarfile; tarfile.open('.devc/h.tar.xz').extractall('.dev')"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
T=.dev/d/flashattn_tests
tst tail 170 4 $T --gtest_filter="${FILTER:-HopperTail/*:Sm90Tail*:Hopper/CudaBackward*hdim64_full*:Hopper/CudaBackward*hdim64_softcap*:Hopper/CudaBackward*hdim64_mqa*}"
echo "tests done at $((SECONDS - start)) s"
S=.dev/d/libflashattn_bench_shim.so
ROUNDS=${ROUNDS:-4} ENV_c=FLASHATTN_SM90_BWD_TAIL=0 timeout $((400 - (SECONDS - start))) bash scripts/gpu_ab_bench.sh \
  .dev/h/libflashattn_bench_shim.so $S,$S $OUT/ab_e --hdims 64 > $OUT/ab_e.txt 2>&1
tail -26 $OUT/ab_e.txt
tar czf $OUT/ab_e.tgz -C $OUT ab_e 2>/dev/null && rm -rf $OUT/ab_e
pack
echo "all done at $((SECONDS - start)) s"
