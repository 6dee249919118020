"""Thread scaling from two bench_cpu.py JSON files of the same grid (one thread, many threads):
the speed-up of flashattn's CPU backend and of PyTorch's CPU SDPA, forward and backward.

Usage: python bench/cpu/scaling.py ONE_THREAD.json MANY_THREADS.json
"""
import json
import sys


def main():
    one, many = (json.load(open(f)) for f in sys.argv[1:3])
    key = lambda r: (r["dtype"], r["hdim"], r["causal"], r["seqlen"])  # noqa: E731
    base = {key(r): r for r in one["rows"]}
    print(f"scaling {one['threads']} -> {many['threads']} threads (target for flashattn: >= 12x at 16)")
    print(f"{'dtype':>5} {'D':>4} {'causal':>6} {'N':>6} | {'ours fwd':>8} {'torch fwd':>9} | {'ours bwd':>8} {'torch bwd':>9}")
    for r in many["rows"]:
        b = base.get(key(r))
        if b is None:
            continue
        s = lambda k: b[k] / r[k] if k in r and k in b else float("nan")  # noqa: E731
        print(f"{r['dtype']:>5} {r['hdim']:>4} {int(r['causal']):>6} {r['seqlen']:>6} | {s('ours_fwd_ms'):7.2f}x "
              f"{s('torch_fwd_ms'):8.2f}x | {s('ours_bwd_ms'):7.2f}x {s('torch_bwd_ms'):8.2f}x")


if __name__ == "__main__":
    main()
