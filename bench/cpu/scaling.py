"""Thread scaling from bench_cpu.py JSON files of the same grid at one thread and at many: the
speed-up of flashattn's CPU backend and of PyTorch's CPU SDPA, forward and backward. Several
files per thread count (runs interleaved in time) give the median time of each point, which
a shared host's noise moves less than one run (the one-thread times moved by 20-50% between
single runs on the H200 host), and the fastest time of each point: other load only slows a
run, so the best of several is the closest to the host's own speed at that thread count.

The `flashattn bench --json` files of the CLI (one dtype and mode each, flashattn alone) are
read too: their rows count as "ours" in the same table (scripts/device_plan/call72.sh, call73.sh).

Usage: python bench/cpu/scaling.py RUN.json [RUN.json ...]   (grouped by their "threads")
"""
import json
import statistics
import sys


def as_grid_run(run):
    """A CLI run (`flashattn bench --json`: dtype and threads per file, a mode and flash_ms per
    row) in bench_cpu.py's shape; bench_cpu.py's own runs as they are."""
    if "backend" not in run:
        return run
    rows = [{"dtype": run["dtype"], "hdim": r["head_dim"], "causal": r["causal"], "seqlen": r["seqlen"],
             f"ours_{r['mode']}_ms": r["flash_ms"]} for r in run["rows"] if r["mode"] in ("fwd", "bwd")]
    return {"threads": run["threads"], "rows": rows}


def main():
    runs = [as_grid_run(json.load(open(f))) for f in sys.argv[1:]]
    one = [r for r in runs if r["threads"] == 1]
    many = [r for r in runs if r["threads"] != 1]
    if not one or not many:
        sys.exit("need runs at one thread and at more than one")
    key = lambda r: (r["dtype"], r["hdim"], r["causal"], r["seqlen"])  # noqa: E731

    def summarise(group, pick):
        times = {}
        for run in group:
            for r in run["rows"]:
                for k in ("ours_fwd_ms", "torch_fwd_ms", "ours_bwd_ms", "torch_bwd_ms"):
                    if k in r:
                        times.setdefault(key(r), {}).setdefault(k, []).append(r[k])
        return {p: {k: pick(v) for k, v in ks.items()} for p, ks in times.items()}

    for label, pick in (("median", statistics.median), ("fastest", min)):
        base, top = summarise(one, pick), summarise(many, pick)
        print(f"scaling 1 -> {many[0]['threads']} threads, {label} of {len(one)} / {len(many)} runs "
              f"(target for flashattn: >= 12x at 16)")
        print(f"{'dtype':>5} {'D':>4} {'causal':>6} {'N':>6} | {'ours fwd':>8} {'torch fwd':>9} | "
              f"{'ours bwd':>8} {'torch bwd':>9}")
        for p, r in top.items():
            b = base.get(p)
            if b is None:
                continue
            s = lambda k, w: f"{b[k] / r[k]:{w - 1}.2f}x" if k in r and k in b else f"{'-':>{w}}"  # noqa: E731
            print(f"{p[0]:>5} {p[1]:>4} {int(p[2]):>6} {p[3]:>6} | {s('ours_fwd_ms', 8)} "
                  f"{s('torch_fwd_ms', 9)} | {s('ours_bwd_ms', 8)} {s('torch_bwd_ms', 9)}")


if __name__ == "__main__":
    main()
