#!/usr/bin/env bash
# Session 42, call 34: v20's probe widened - the same hd128 non-causal forward (main's build d)
# at 16, 32, 33 and 34 heads (2048 / 4096 / 4224 / 4352 tiles of 128 rows: 15.5 / 31.0 / 32.0
# / 33.0 rounds on 132 SMs), N = 4096 and 16384, beside cuDNN. If the round count sets the
# speed, 32 heads read like 16 and 34 like 33.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
[ -d .dev/d ] || python3 -c "import tarfile; tarfile.open('.devc/d.tar.xz').extractall('.dev')"
nvidia-smi --query-gpu=name --format=csv,noheader
for r in 1 2; do
  for md in 2048 4096 4224 4352; do
    echo "## round $r, model dim $md ($((md / 128)) heads)"
    timeout 60 python3 bench/gpu/bench_gpu.py --shim .dev/d/libflashattn_bench_shim.so --warmup-ms 100 --fwd-only \
      --hdims 128 --seqlens 4096,16384 --causal 0 --model-dim $md 2>&1 | tail -2
  done
done
