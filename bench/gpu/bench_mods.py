#!/usr/bin/env python3
"""flashattn with score modifiers (softcap, ALiBi) on the GPU: the Hopper kernels
beside the portable sm80 ones on the same problem, one process.

PyTorch's scaled_dot_product_attention has no softcap and takes ALiBi only as a
dense bias, so the peers here are our own sm80 kernels (FLASHATTN_FORCE_SM80=1,
read per call). Shapes as bench_gpu.py (bf16, B*N = 16384, Hq*D = 2048, [B, H, N, D]
through strides); each point's gradients are also compared between the two paths.

    python3 bench/gpu/bench_mods.py --shim build/bench/gpu/libflashattn_bench_shim.so \
        --json bench/results/x.json
"""
import argparse
import ctypes
import datetime
import json
import os

import torch

import bench_gpu
from bench_gpu import Flashattn, time_ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shim", required=True)
    ap.add_argument("--hdims", default="64,128,256")
    ap.add_argument("--seqlens", default="2048,8192")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--mods", default="softcap,alibi,both", help="softcap (30), alibi (slopes 2^-8h/H), both")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--warmup-ms", type=float, default=100.0, help="calls before each timing (bench_gpu.py)")
    ap.add_argument("--json")
    args = ap.parse_args()
    bench_gpu.WARMUP_S = args.warmup_ms / 1000.0
    fa = Flashattn(args.shim)
    fa.lib.fa_set_mods.argtypes = [ctypes.c_float, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int]
    fa.lib.fa_set_mods.restype = None
    rows = []
    print(f"{'D':>4} {'causal':>6} {'N':>6} {'mods':>8} | {'fwd sm90':>8} {'sm80':>6} | {'bwd sm90':>8} {'sm80':>6} "
          f"| max |d grad| sm90 vs sm80")
    for d in map(int, args.hdims.split(",")):
        for causal in (bool(int(c)) for c in args.causal.split(",")):
            for n in map(int, args.seqlens.split(",")):
                b, h = max(1, 16384 // n), 2048 // d
                torch.manual_seed(0)
                q, k, v, do = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
                slopes = torch.tensor([2.0 ** (-8.0 * (i + 1) / h) for i in range(h)], device="cuda")
                out = torch.empty_like(q)
                lse = torch.empty(b, h, n, device="cuda", dtype=torch.float32)
                dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
                flops = 4 * b * h * n * n * d / (2 if causal else 1)
                for mods in args.mods.split(","):
                    cap = 30.0 if mods in ("softcap", "both") else 0.0
                    alibi = slopes.data_ptr() if mods in ("alibi", "both") else None
                    fa.lib.fa_set_mods(cap, alibi, h, 0)
                    row = {"hdim": d, "causal": causal, "seqlen": n, "batch": b, "heads": h, "mods": mods}
                    grads = {}
                    for side in ("sm90", "sm80"):
                        if side == "sm80":
                            os.environ["FLASHATTN_FORCE_SM80"] = "1"
                        fwd = fa.forward_call(q, k, v, out, lse, causal=causal)
                        row[f"{side}_fwd_ms"] = time_ms(fwd, args.warmup, args.repeats)
                        fwd()
                        bwd = fa.backward_call(do, q, k, v, out, lse, dq, dk, dv, causal=causal)
                        row[f"{side}_bwd_ms"] = time_ms(bwd, args.warmup, args.repeats)
                        bwd()
                        torch.cuda.synchronize()
                        grads[side] = [t.float().clone() for t in (dq, dk, dv)]
                        os.environ.pop("FLASHATTN_FORCE_SM80", None)
                    row["max_abs_diff_grads"] = max((a - c).abs().max().item()
                                                    for a, c in zip(grads["sm90"], grads["sm80"]))
                    for side in ("sm90", "sm80"):
                        row[f"{side}_fwd_tflops"] = flops / row[f"{side}_fwd_ms"] / 1e9
                        row[f"{side}_bwd_tflops"] = 2.5 * flops / row[f"{side}_bwd_ms"] / 1e9
                    rows.append(row)
                    print(f"{d:>4} {int(causal):>6} {n:>6} {mods:>8} | {row['sm90_fwd_tflops']:>8.1f} "
                          f"{row['sm80_fwd_tflops']:>6.1f} | {row['sm90_bwd_tflops']:>8.1f} {row['sm80_bwd_tflops']:>6.1f} "
                          f"| {row['max_abs_diff_grads']:.3g}", flush=True)
                fa.lib.fa_set_mods(0.0, None, 0, 0)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"date": datetime.date.today().isoformat(), "gpu": torch.cuda.get_device_name(),
                       "torch": torch.__version__, "command": "python3 bench/gpu/bench_mods.py " +
                       " ".join(f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k not in ("shim", "json")),
                       "units": "TFLOP/s (contract count; bwd 2.5x fwd)", "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
