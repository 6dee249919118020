"""The Hopper issues' targets checked on bench_gpu.py JSON files (bf16, beside cuDNN in the
same run): every point's ours / cuDNN ratio against 1.05x (N >= 2048) or 1.0x (below), and the
absolute TFLOP/s targets at N = 16384. Several files (runs of the same grid) are checked one by
one and then as the median of each point's TFLOP/s over the files.

Usage: python bench/gpu/targets.py RESULT.json [RESULT.json ...]"""
import json
import statistics
import sys

# (pass, head dim, causal): TFLOP/s wanted at N = 16384 (issues 5 and 6).
ABSOLUTE = {("fwd", 128, False): 680, ("fwd", 128, True): 640, ("bwd", 128, False): 550, ("bwd", 256, False): 400}


def ratio_floor(n):
    return 1.05 if n >= 2048 else 1.0


def check(rows, label):
    """Prints the misses of one grid; returns the number of points that miss."""
    misses = 0
    print(f"== {label}")
    for pas in ("fwd", "bwd"):
        ours, peer = f"ours_{pas}_tflops", f"cudnn_{pas}_tflops"
        pts = [r for r in rows if ours in r and peer in r]
        if not pts:
            continue
        long = [r[ours] / r[peer] for r in pts if r["seqlen"] >= 2048]
        short = [r[ours] / r[peer] for r in pts if r["seqlen"] < 2048]
        met = sum(1 for r in pts if r[ours] / r[peer] >= ratio_floor(r["seqlen"]))
        rng = lambda xs: f"{min(xs):.2f}-{max(xs):.2f}x" if xs else "-"  # noqa: E731
        print(f"  {pas}: N >= 2048 {rng(long)}, N < 2048 {rng(short)}; {met} of {len(pts)} points meet their floor")
        for r in pts:
            x = r[ours] / r[peer]
            if x < ratio_floor(r["seqlen"]):
                misses += 1
                print(f"    miss: hd{r['hdim']} {'causal' if r['causal'] else 'no mask'} N={r['seqlen']}: "
                      f"{r[ours]:.0f} / {r[peer]:.0f} = {x:.3f}x (floor {ratio_floor(r['seqlen']):.2f})")
        for (p, d, c), want in ABSOLUTE.items():
            if p != pas:
                continue
            for r in pts:
                if r["hdim"] == d and bool(r["causal"]) == c and r["seqlen"] == 16384:
                    ok = r[ours] >= want
                    misses += not ok
                    print(f"    hd{d} {'causal' if c else 'no mask'} 16k: {r[ours]:.0f} TFLOP/s "
                          f"(target {want}, cuDNN {r[peer]:.0f}) {'met' if ok else 'MISSED'}")
    return misses


def median_rows(runs):
    """Each point's median TFLOP/s over the runs that have it."""
    key = lambda r: (r["hdim"], bool(r["causal"]), r["seqlen"])  # noqa: E731
    merged = {}
    for rows in runs:
        for r in rows:
            m = merged.setdefault(key(r), {"hdim": r["hdim"], "causal": bool(r["causal"]), "seqlen": r["seqlen"]})
            for k, v in r.items():
                if k.endswith("_tflops"):
                    m.setdefault(k, []).append(v)
    return [{k: (statistics.median(v) if isinstance(v, list) else v) for k, v in m.items()} for m in merged.values()]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    runs = []
    for f in sys.argv[1:]:
        data = json.load(open(f))
        runs.append(data["rows"])
        check(data["rows"], f"{f} ({data.get('gpu', '?')})")
    if len(runs) > 1:
        check(median_rows(runs), f"median of {len(runs)} runs")


if __name__ == "__main__":
    main()
