#!/usr/bin/env bash
# Prepared in session 42 (the device time ran out before it): prefill into a KV cache filled
# to 80% (seqused_k), 512 new rows a sequence, causal: the Hopper forward (sm90 forward v19)
# against the sm80 kernels (FLASHATTN_FORCE_SM80=1). Needs main's shim from
# `bash scripts/device_plan/prepare.sh` (.devc/d.tar.xz); about a minute.
# run(command="bash .devc/call35.sh 2>&1 | tee $OUT/call35.log", carry=[".devc"])
set -uo pipefail
cd "$(dirname "$0")/.."
[ -d .dev/d ] || python3 -c "import tarfile; tarfile.open('.devc/d.tar.xz').extractall('.dev')"
for env in "" "FLASHATTN_FORCE_SM80=1"; do
  echo "## ${env:-hopper}"
  env $env timeout 40 python3 bench/gpu/bench_decode.py --shim .dev/d/libflashattn_bench_shim.so --used 0.8 --sq 512 \
    --no-tiled --shapes 8x8192,1x32768 --calls 10 --repeats 10 2>&1 | tail -3 | tee -a $OUT/prefill.txt
done
