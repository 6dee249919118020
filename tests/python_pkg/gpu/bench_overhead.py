"""Calling overhead at a tiny size (B=1, H=1, N=16, D=64, bf16, CUDA): flashattn's PyTorch
functions against torch.nn.functional.scaled_dot_product_attention. The GPU work is a few
microseconds, so the time per call is the host-side cost of the call.

Usage: python bench_overhead.py [--json FILE] [--calls 2000] [--repeats 7] [--device cuda]
The issue's target: flashattn within 2x of SDPA."""

import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

import flashattn
import flashattn.torch as ft


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def per_call_us(fn, calls, repeats):
    for _ in range(50):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        times.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--device", default="cuda", help="cpu: a smoke test of this script")
    a = ap.parse_args()

    B, H, N, D = 1, 1, 16, 64
    mk = lambda: torch.randn(B, H, N, D, device=a.device, dtype=torch.bfloat16)  # noqa: E731
    q, k, v = mk(), mk(), mk()                           # [B, H, N, D] for SDPA
    qs, ks, vs = (t.transpose(1, 2) for t in (q, k, v))  # [B, N, H, D] views for flash_attn_func
    qg, kg, vg = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    qsg, ksg, vsg = (t.transpose(1, 2) for t in (qg, kg, vg))
    dout = torch.randn(B, H, N, D, device=a.device, dtype=torch.bfloat16)
    args = (D ** -0.5, True, -1, -1, 0.0, None, 0.0, None, False)

    def fwd_bwd(f):
        def run():
            out = f()
            torch.autograd.grad(out, (qg, kg, vg), dout if out.shape == dout.shape else dout.transpose(1, 2))
        return run

    out_s, lse_s = flashattn.forward(qs, ks, vs, causal=True, return_lse=True)
    dout_s = dout.transpose(1, 2)
    dq_s, dk_s, dv_s = (torch.empty_like(t) for t in (qs, ks, vs))

    cases = {
        "forward": {
            "sdpa": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
            "flashattn.torch.scaled_dot_product_attention": lambda: ft.scaled_dot_product_attention(q, k, v, is_causal=True),
            "flashattn.torch.flash_attn_func": lambda: ft.flash_attn_func(qs, ks, vs, causal=True),
            "torch.ops.flashattn.fwd": lambda: torch.ops.flashattn.fwd(qs, ks, vs, *args),
            "flashattn.forward (DLPack, generic)": lambda: flashattn.forward(qs, ks, vs, causal=True),
        },
        "backward": {
            "flashattn.backward (DLPack, generic)": lambda: flashattn.backward(
                dout_s, qs, ks, vs, out_s, lse_s, causal=True, dq=dq_s, dk=dk_s, dv=dv_s),
        },
        "forward+backward": {
            "sdpa": fwd_bwd(lambda: F.scaled_dot_product_attention(qg, kg, vg, is_causal=True)),
            "flashattn.torch.scaled_dot_product_attention": fwd_bwd(
                lambda: ft.scaled_dot_product_attention(qg, kg, vg, is_causal=True)),
            "flashattn.torch.flash_attn_func": fwd_bwd(lambda: ft.flash_attn_func(qsg, ksg, vsg, causal=True)),
            "torch.ops.flashattn.fwd": fwd_bwd(lambda: torch.ops.flashattn.fwd(qsg, ksg, vsg, *args)[0]),
        },
    }
    results = {"device": torch.cuda.get_device_name() if a.device == "cuda" else a.device, "torch": torch.__version__,
               "flashattn": flashattn.__version__, "shape": [B, H, N, D], "dtype": "bf16", "us_per_call": {}}
    ok = True
    for mode, fns in cases.items():
        us = {name: per_call_us(fn, a.calls, a.repeats) for name, fn in fns.items()}
        results["us_per_call"][mode] = us
        if "sdpa" not in us:  # flashattn's own backward, no peer to compare with
            for name, t in us.items():
                print(f"{mode}:\n  {name:48s} {t:8.1f} us")
            results["us_per_call"][mode] = us
            continue
        base = us["sdpa"]
        print(f"{mode}:")
        for name, t in us.items():
            print(f"  {name:48s} {t:8.1f} us  {t / base:5.2f}x sdpa")
        ratio = us["flashattn.torch.flash_attn_func"] / base
        results[f"{mode} ratio (flash_attn_func / sdpa)"] = ratio
        ok &= ratio <= 2.0
    results["within_2x"] = ok
    print("flash_attn_func within 2x of SDPA:", "yes" if ok else "NO")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
