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

Usage: python bench/gpu/schedule_model.py [--blocks 132]"""
import argparse


def order(num_m, bh, section, triangle):
    sections = (bh + section - 1) // section
    for t in range(num_m * bh):
        s, rest = divmod(t, section * num_m)
        n = min(section, bh - s * section)
        step = rest // n
        descending = not triangle or (sections - 1 - s) % 2 == 0
        yield num_m - 1 - step if descending else step


def imbalance(costs, blocks):
    load = [0] * blocks
    for t, m in enumerate(costs):
        r, c = divmod(t, blocks)
        load[c if r % 2 == 0 else blocks - 1 - c] += m + 1
    return max(load) / (sum(load) / blocks)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=132)
    a = ap.parse_args()
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
