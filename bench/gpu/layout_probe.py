"""Forward time by memory layout and by timing method, flashattn beside cuDNN.

The grid (bench_gpu.py) times one call at a time on [B, H, N, D] tensors; the tile
sweep (sm90_tile_sweep.cu) times kernel launches on [B, N, H, D] memory. This
probe runs both layouts ([B, N, H, D] memory as a transposed view) and two timing
methods (one call between events, the grid's; and 20 calls back to back between
two events, the steady state) on the same problems, so a gap between the two
tools can be put down to the layout, the method or neither.

Usage (on the GPU machine): python3 bench/gpu/layout_probe.py --shim libflashattn_bench_shim.so
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_gpu import Flashattn, time_ms  # noqa: E402


def back_to_back_ms(fn, warmup=5, calls=20):
    for _ in range(warmup):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / calls


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shim", required=True)
    ap.add_argument("--problems", default="128:0:16384,128:1:16384,128:0:2048,128:0:512,64:0:16384,256:0:16384",
                    help="D:causal:N, comma-separated (B = 16384 / N, H = 2048 / D)")
    a = ap.parse_args()
    fa = Flashattn(a.shim)
    dev = torch.device("cuda")
    print(f"{'D':>4} {'causal':>6} {'N':>6} {'layout':>6} | {'ours 1 call':>11} {'ours steady':>11} | "
          f"{'cuDNN 1 call':>12} {'cuDNN steady':>12}   (TFLOP/s)")
    for spec in a.problems.split(","):
        d, causal, n = (int(x) for x in spec.split(":"))
        b, h = max(1, 16384 // n), 2048 // d
        flops = 4 * b * h * n * n * d / (2 if causal else 1)
        for layout in ("bhnd", "bnhd"):
            if layout == "bhnd":
                q, k, v = (torch.randn(b, h, n, d, device=dev, dtype=torch.bfloat16) for _ in range(3))
            else:
                q, k, v = (torch.randn(b, n, h, d, device=dev, dtype=torch.bfloat16).transpose(1, 2) for _ in range(3))
            out = torch.empty_like(q)
            lse = torch.empty(b, h, n, device=dev, dtype=torch.float32)
            ours = fa.forward_call(q, k, v, out, lse, causal=bool(causal))

            def cudnn():
                with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                    F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
            t = [time_ms(ours, 5, 20), back_to_back_ms(ours), time_ms(cudnn, 5, 20), back_to_back_ms(cudnn)]
            print(f"{d:4d} {causal:6d} {n:6d} {layout:>6} | " + " ".join(
                f"{flops / x / 1e9:{w}.1f}" for x, w in zip(t, (11, 11, 12, 12))), flush=True)


if __name__ == "__main__":
    main()
