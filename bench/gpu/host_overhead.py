#!/usr/bin/env python3
"""Host time of one call from Python, GPU kept busy (launches only queue), median of
200, in microseconds: flashattn through the benchmark's ctypes shim (arguments
marshalled per call, and prepared once as bench_gpu.py times it), and PyTorch's SDPA
with the FlashAttention-2 and cuDNN backends. bf16, B*N = 16384, H*D = 2048.

    python3 bench/gpu/host_overhead.py SHIM
"""
import os, sys, time, statistics
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch, torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from bench_gpu import Flashattn


def host_us(fn, n=200):
    torch.cuda.synchronize()
    torch.cuda._sleep(1_000_000_000)  # ~0.5 s of GPU work queued first
    ts = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        fn()
        ts.append(time.perf_counter_ns() - t0)
    torch.cuda.synchronize()
    return statistics.median(ts) / 1e3


fa = Flashattn(sys.argv[1])
for d in (64, 128, 256):
    n = 512
    b, h = 16384 // n, 2048 // d
    q, k, v, do = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    out = torch.empty_like(q)
    lse = torch.empty(b, h, n, device="cuda", dtype=torch.float32)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    res = {}
    res["ours fwd (ctypes per call)"] = host_us(lambda: fa.forward(q, k, v, out, lse))
    res["ours fwd (prepared call)"] = host_us(fa.forward_call(q, k, v, out, lse))
    res["torch.cuda.current_stream()"] = host_us(lambda: torch.cuda.current_stream().cuda_stream)
    res["ours bwd (ctypes per call)"] = host_us(lambda: fa.backward(do, q, k, v, out, lse, dq, dk, dv))
    res["ours bwd (prepared call)"] = host_us(fa.backward_call(do, q, k, v, out, lse, dq, dk, dv))
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        res["FA2 fwd"] = host_us(lambda: F.scaled_dot_product_attention(q, k, v))
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        res["cuDNN fwd"] = host_us(lambda: F.scaled_dot_product_attention(q, k, v))
        qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
        o = F.scaled_dot_product_attention(qg, kg, vg)
        res["cuDNN bwd"] = host_us(lambda: torch.autograd.grad(o, (qg, kg, vg), do, retain_graph=True))
    print(f"D={d} N={n}: " + ", ".join(f"{key} {val:.1f}" for key, val in res.items()), flush=True)
