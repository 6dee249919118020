#!/usr/bin/env bash
# A/B of two builds of a sweep program (bench/gpu/tile_sweep.cu or
# sm90_tile_sweep.cu) on the GPU machine: the two binaries run in alternating
# processes, ROUNDS times (default 2), and their lines are pasted side by side
# (A | B | A | B ...). The GPU runs a few percent faster in the first process
# after idling, so one run of each, one after the other, misleads.
# Usage: [ROUNDS=2] scripts/gpu_ab.sh BIN_A BIN_B OUT_DIR [sweep args, e.g. 2048 16384]
set -uo pipefail
a=$1; b=$2; out=$3; shift 3
rounds=${ROUNDS:-2}
mkdir -p "$out"
cols=()
for ((r = 1; r <= rounds; r++)); do
  for v in a b; do
    bin=$a; [ $v = b ] && bin=$b
    timeout 300 "$bin" "$@" > "$out/$v$r.log" 2>&1 || echo "$v round $r: exit $?"
    cols+=("$out/$v$r.log")
  done
done
# Each line: the shape and problem from the first log, then every run's TFLOP/s.
python3 - "${cols[@]}" <<'PY'
import re, sys
runs = [open(f).read().splitlines() for f in sys.argv[1:]]
for i, line in enumerate(runs[0]):
    m = re.search(r"\s+[0-9.]+ TFLOP/s", line)
    if not m:
        continue
    vals = []
    for r in runs:
        v = re.search(r"([0-9.]+) TFLOP/s", r[i]) if i < len(r) else None
        vals.append(v.group(1) if v else "-")
    print(line[:m.start()].rstrip() + "  | " + " | ".join(vals))
PY
