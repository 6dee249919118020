#!/usr/bin/env bash
# A/B of two builds' forward and backward through bench_gpu.py on the GPU machine.
# The builds run in alternating processes, ROUNDS times each (default 2): the GPU
# is a few percent faster in the first process after idling, and two shims cannot
# share one process (GCC's unique symbols would tie their once-only kernel set-up
# together). Prints each point's TFLOP/s per run and B's mean speed over A's.
# Every timing follows WARMUP_MS (default 100) of back-to-back calls, past the
# ~0.1 s boost the GPU gives after idling, so both builds meet its power cap:
# without it, rows running the same code on both sides moved by up to 7% between
# processes (bench/results/2026-11-30_h200_ab_s9_bwd_v10.txt); WARMUP_MS=0 times
# from idle. A_ENV / B_ENV (NAME=VALUE ...) set variables for one side's runs,
# so that one build can be compared with itself under two settings (the same
# shim for both, FLASHATTN_SM80_TILES=standard against large, say).
# Usage: [ROUNDS=2] [WARMUP_MS=100] [A_ENV=..] [B_ENV=..] scripts/gpu_ab_bench.sh SHIM_A SHIM_B OUT_DIR [bench_gpu.py args]
set -uo pipefail
a=$1; b=$2; out=$3; shift 3
rounds=${ROUNDS:-2}
mkdir -p "$out"
files=()
for ((r = 1; r <= rounds; r++)); do
  for v in a b; do
    shim=$a; side_env=${A_ENV:-}; [ $v = b ] && shim=$b && side_env=${B_ENV:-}
    # shellcheck disable=SC2086  # NAME=VALUE words
    env $side_env timeout 300 python3 "$(dirname "$0")/../bench/gpu/bench_gpu.py" --shim "$shim" --no-peers \
      --warmup-ms "${WARMUP_MS:-100}" \
      --json "$out/$v$r.json" "$@" > "$out/$v$r.log" 2>&1 || echo "$v round $r: exit $?"
    files+=("$out/$v$r.json")
  done
done
python3 - "${files[@]}" <<'PY'
import json, statistics, sys
runs = {}
for f in sys.argv[1:]:
    try:
        runs[f] = json.load(open(f))["rows"]
    except (OSError, ValueError):
        print(f"{f}: no result")
side = lambda f: f.rsplit("/", 1)[1][0]
print(f"{'D':>4} {'causal':>6} {'N':>6} {'pass':>8} | {'A runs':>17} | {'B runs':>17} | B/A")
first = next(iter(runs.values()), [])
for i, row in enumerate(first):
    for mode in ("fwd", "bwd", "sm80_fwd", "sm80_bwd"):  # sm80_*: with --sm80-too
        key = f"ours_{mode}_tflops"
        if key not in row:
            continue
        vals = {"a": [], "b": []}
        for f, rows in runs.items():
            if i < len(rows) and key in rows[i]:
                vals[side(f)].append(rows[i][key])
        fmt = lambda xs: " ".join(f"{x:8.1f}" for x in xs)
        ratio = (statistics.mean(vals["b"]) / statistics.mean(vals["a"])) if vals["a"] and vals["b"] else float("nan")
        print(f"{row['hdim']:>4} {int(row['causal']):>6} {row['seqlen']:>6} {mode:>8} | {fmt(vals['a']):>17} | "
              f"{fmt(vals['b']):>17} | {ratio:5.3f}")
PY
