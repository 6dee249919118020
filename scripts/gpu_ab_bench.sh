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
# SHIM_B may be a comma-separated list (b, c, d, ...: several variants against A in
# the same alternation); each gets its own ratio column. ENV_a, ENV_b, ENV_c, ...
# (NAME=VALUE ...) set one side's variables in place of A_ENV / B_ENV, so that one
# build can run as two sides (the same shim twice, with and without a switch).
# Usage: [ROUNDS=2] [WARMUP_MS=100] [A_ENV=..] [B_ENV=..] [ENV_c=..] scripts/gpu_ab_bench.sh SHIM_A SHIM_B[,SHIM_C..] OUT_DIR [bench_gpu.py args]
set -uo pipefail
a=$1; IFS=, read -r -a bs <<< "$2"; out=$3; shift 3
rounds=${ROUNDS:-2}
mkdir -p "$out"
names=(a b c d e f g h)
files=()
for ((r = 1; r <= rounds; r++)); do
  for ((i = 0; i <= ${#bs[@]}; i++)); do
    v=${names[$i]}
    shim=$a; side_env=${A_ENV:-}; [ $i -gt 0 ] && shim=${bs[$((i - 1))]} && side_env=${B_ENV:-}
    own=ENV_$v; side_env=${!own:-$side_env}  # ENV_b, ENV_c, ...: one side's own settings
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
sides = sorted({side(f) for f in runs})
others = [v for v in sides if v != "a"]
w = 9 * max(1, max((sum(side(f) == v for f in runs) for v in sides), default=1))
print(f"{'D':>4} {'causal':>6} {'N':>6} {'pass':>8} | " + " | ".join(f"{v.upper() + ' runs':>{w}}" for v in sides)
      + " | " + " ".join(f"{v.upper() + '/A':>5}" for v in others))
first = next(iter(runs.values()), [])
for i, row in enumerate(first):
    for mode in ("fwd", "bwd", "sm80_fwd", "sm80_bwd"):  # sm80_*: with --sm80-too
        key = f"ours_{mode}_tflops"
        if key not in row:
            continue
        vals = {v: [] for v in sides}
        for f, rows in runs.items():
            if i < len(rows) and key in rows[i]:
                vals[side(f)].append(rows[i][key])
        fmt = lambda xs: "".join(f"{x:9.1f}" for x in xs)
        ratio = lambda v: (statistics.mean(vals[v]) / statistics.mean(vals["a"])) if vals["a"] and vals[v] else float("nan")
        print(f"{row['hdim']:>4} {int(row['causal']):>6} {row['seqlen']:>6} {mode:>8} | "
              + " | ".join(f"{fmt(vals[v]):>{w}}" for v in sides) + " | " + " ".join(f"{ratio(v):5.3f}" for v in others))
PY
