"""The CPU backend's work split at the host's scaling point, modelled.

B = 1, 4 heads, N = 8192, D = 128, non-causal, 16 threads. Threads take items in
order, each when it is free (OpenMP dynamic, or the backward's item counter).
Every thread has its own constant speed, drawn around 1 with spread `sigma`
(cores of a shared host do not run alike), and every step varies by 3%. The
model prints the ideal time over the makespan (1.0 = every thread busy to the
end) for:

  bwd v8:  32 items (8 key chunks x 4 heads, 16 key tiles each): 2 per thread
  1 chain: 128 items, one per (head, group of 4 key tiles), handed out
           group-major; query tile j of an item adds to the shared dQ^T block
           only after the previous group of that head did (a FIFO of 8 parts
           per thread: an item stalls only when the part 8 query tiles back is
           still not due; depth 1 = add in place, as v9 does)
  1 chain + tail: the same, the last 16 groups cut into single key tiles
  bwd v9:  4 chains (group g adds after group g - 4 of its head, handed out 16
           items earlier), adding in place
  v9 + tail: + the cut tiles handed out by rank in chain (tried: the cut items
           ran 8-15% slower per thread, more than the model's gain)
  fwd v8:  256 items of 128 rows
  fwd v9:  112 items of 256 rows, then 32 of 128 rows (bf16; 64 of 64 rows cost
           more per flop than the finer end gains, see docs/cpu_notes.md v9)

Usage: python bench/cpu/schedule_model.py [--threads 16] [--seeds 30]"""
import argparse
import random
import statistics

JITTER = 0.03


def backward(nt, speed, rng, items, depth=8, n_qt=128):
    """items: (chain, position in chain, tiles) in hand-out order; an item's parts
    go after those of the item before it in its chain."""
    free = [0.0] * nt
    done = {}
    for chain, pos, tiles in items:
        t = min(range(nt), key=lambda i: free[i])
        now = free[t]
        flushed = []
        prev = done.get((chain, pos - 1))
        for j in range(n_qt):
            start = now if j < depth else max(now, flushed[j - depth])
            now = start + tiles / 4 * rng.gauss(1, JITTER) / speed[t]
            f = now if prev is None else max(now, prev[j])
            if flushed:
                f = max(f, flushed[-1])
            flushed.append(f)
        done[(chain, pos)] = flushed
        free[t] = max(now, flushed[-1])
    return max(free)


def chunks_v8(nt, speed, rng):
    free = [0.0] * nt
    for _ in range(32):
        t = min(range(nt), key=lambda i: free[i])
        free[t] += sum(rng.gauss(1, JITTER) for _ in range(16 // 4 * 128)) / speed[t]
    return max(free)


def forward(nt, speed, rng, sizes):
    free = [0.0] * nt
    for w in sizes:
        t = min(range(nt), key=lambda i: free[i])
        free[t] += w * rng.gauss(1, JITTER) / speed[t]
    return max(free)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--seeds", type=int, default=30)
    a = ap.parse_args()
    nt = a.threads
    # Group-major: item i is group g = i // 4 of head i % 4; (chain, rank in chain, tiles).
    groups = [(i % 4, i // 4, 4) for i in range(128)]
    tail = groups[:112] + [(i % 4, 28 + 4 * (i // 4 - 28) + s, 1) for i in range(112, 128) for s in range(4)]
    # 4 chains per head: group g in chain (head, g % 4); cut tiles by rank in chain.
    chains = [((i % 4, i // 4 % 4), i // 16, 4) for i in range(128)]
    chained = [((i % 4, i // 4 % 4), i // 16, 4) for i in range(112)]
    chained += sorted([((i % 4, i // 4 % 4), 7 + s, 1) for i in range(112, 128) for s in range(4)],
                      key=lambda x: x[1])
    work_bwd = 128 * 128  # (query tile, 4-key-tile group) steps
    work_fwd = 256 * 2    # 64-row units
    for sigma in (0.0, 0.05, 0.10):
        r = {k: [] for k in ("bwd v8", "1 chain", "1 chain + tail", "bwd v9", "v9 + tail", "fwd v8", "fwd v9")}
        for seed in range(a.seeds):
            rng = random.Random(seed)
            speed = [max(0.5, rng.gauss(1, sigma)) for _ in range(nt)]
            rate = sum(speed)
            r["bwd v8"].append(work_bwd / rate / chunks_v8(nt, speed, rng))
            r["1 chain"].append(work_bwd / rate / backward(nt, speed, rng, groups))
            r["1 chain + tail"].append(work_bwd / rate / backward(nt, speed, rng, tail))
            r["bwd v9"].append(work_bwd / rate / backward(nt, speed, rng, chains, depth=1))
            r["v9 + tail"].append(work_bwd / rate / backward(nt, speed, rng, chained, depth=1))
            r["fwd v8"].append(work_fwd / rate / forward(nt, speed, rng, [2] * 256))
            r["fwd v9"].append(work_fwd / rate / forward(nt, speed, rng, [4] * 112 + [2] * 32))
        print(f"sigma {sigma:.2f}: " + ", ".join(f"{k} {statistics.mean(v):.3f}" for k, v in r.items()))


if __name__ == "__main__":
    main()
