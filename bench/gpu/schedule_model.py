"""Load balance of the Hopper forward's static persistent schedule, modelled.

Blocks c = 0..G-1 take tile r*G + c in round r (every other round reversed:
the snake). A causal query tile m costs m + 1 key tiles. The model prints the
heaviest block's load over the mean (1.0 = perfect) for the contract's grid
under three tile orders of the heaviest-first list (fwd_scheduler.cuh):

  global:   one list over all heads, query tiles descending (v3, main)
  sawtooth: sections of heads whose K/V fit 32 MiB, each descending
            (measured 618 -> 499 TFLOP/s at hd128 16k and 626 -> 407 at hd256)
  triangle: the same sections, alternately ascending and descending, the
            last descending

With --l2 MIB it also models the DRAM traffic of the short causal calls (sm90
forward v30, fwd_sections.h): an LRU cache of MIB over each round's tiles run side
by side (Q, then each key tile's K and V walked from the diagonal, then O), in
today's 32 MiB sections and in 8 MiB ones, as bytes over the minimum (Q, K, V and O
once); session 53's ncu measured 1.28x / 1.47x cuDNN's (which sits at the minimum)
at hd128 causal N = 512 / 1024, between this model's 25 and 40 MiB figures. The 8 MiB
column's imbalance at hd128 / hd256 is why fwd_sections.h halves a section until the
modelled balance holds.

Usage: python bench/gpu/schedule_model.py [--blocks 132] [--l2 30]"""
import argparse
import collections


def order(num_m, bh, section, triangle):
    """The list's tiles as (query tile, head) pairs."""
    sections = (bh + section - 1) // section
    for t in range(num_m * bh):
        s, rest = divmod(t, section * num_m)
        step, pair = divmod(rest, min(section, bh - s * section))
        descending = not triangle or (sections - 1 - s) % 2 == 0
        yield (num_m - 1 - step if descending else step), s * section + pair


def imbalance(tiles, blocks):
    load = [0] * blocks
    for t, (m, _) in enumerate(tiles):
        r, c = divmod(t, blocks)
        load[c if r % 2 == 0 else blocks - 1 - c] += m + 1
    return max(load) / (sum(load) / blocks)


def dram_over_minimum(d, n, section_bytes, cap, blocks, block_m=128, block_n=128):
    """DRAM bytes over the minimum, and the balance, of a causal call of the grid in
    triangle sections of section_bytes of K/V (cost m + 1: block_m == block_n)."""
    bh = 16384 // n * 2048 // d
    num_m = -(-n // block_m)
    kv = n * 2 * d * 2
    section = max(1, min(bh, section_bytes // kv))
    tiles = list(order(num_m, bh, section, True))
    lru, size, miss = collections.OrderedDict(), 0, 0
    kt, qt = block_n * d * 2, block_m * d * 2

    def touch(key, b, write=False):
        nonlocal size, miss
        if key in lru:
            lru.move_to_end(key)
            return
        miss += b  # a read misses; a write is counted once
        lru[key] = b
        size += b
        while size > cap:
            size -= lru.popitem(last=False)[1]

    for r0 in range(0, len(tiles), blocks):
        rnd = tiles[r0:r0 + blocks]
        for m, h in rnd:
            touch(("q", h, m), qt)
        for j in range(max(m for m, _ in rnd) + 1):
            for m, h in rnd:
                if j <= m:
                    touch(("k", h, m - j), kt)
                    touch(("v", h, m - j), kt)
        for m, h in rnd:
            touch(("o", h, m), qt, write=True)
    return section, miss / (4 * bh * n * d * 2), imbalance(tiles, blocks)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=132)
    ap.add_argument("--l2", type=float, default=0.0, help="also model DRAM bytes with an LRU L2 of this many MiB")
    a = ap.parse_args()
    if a.l2 > 0:
        cap = int(a.l2 * 2**20)
        print(f"causal, L2 as {a.l2:g} MiB LRU: sections (pairs), DRAM bytes over the minimum, imbalance")
        print(f"{'D':>4} {'N':>6} | {'32 MiB sections':>24} | {'8 MiB sections':>24}")
        for d in (64, 128, 256):
            for n in (512, 1024, 2048, 4096):
                cols = []
                for mib in (32, 8):
                    sec, x, imb = dram_over_minimum(d, n, mib << 20, cap, a.blocks)
                    cols.append(f"{sec:>5} {x:8.2f} {imb:8.3f}")
                print(f"{d:>4} {n:>6} | {cols[0]:>24} | {cols[1]:>24}")
        return
    print(f"{'D':>4} {'N':>7} {'tiles':>6} {'heads':>5} {'section':>7} | global  sawtooth  triangle")
    for d, block_m in ((64, 192), (128, 128), (256, 128)):
        for n in (2048, 4096, 8192, 16384, 131072):
            bh = max(1, 16384 // n) * 2048 // d if n <= 16384 else 16
            num_m = -(-n // block_m)
            kv = n * 2 * d * 2  # K and V of one head, bf16
            section = max(1, min(bh, (32 << 20) // kv))
            g = imbalance(order(num_m, bh, bh, False), a.blocks)
            s = imbalance(order(num_m, bh, section, False), a.blocks)
            t = imbalance(order(num_m, bh, section, True), a.blocks)
            print(f"{d:>4} {n:>7} {num_m:>6} {bh:>5} {section:>7} | {g:6.3f} {s:9.3f} {t:9.3f}")


if __name__ == "__main__":
    main()
