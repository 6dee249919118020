#!/usr/bin/env python3
"""Where the time of a call goes: per-call-synchronised event time (bench_gpu.py's
method, which counts the host's time to the first launch), back-to-back time (host
hidden), the call's host time alone, and the kernels' own durations from the
profiler. Ours and cuDNN, bf16, B*N = 16384, H*D = 2048, a few grid points.

    python3 bench/gpu/call_overhead.py SHIM OUT.json
"""
import os, sys, time, statistics, json
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch, torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from bench_gpu import Flashattn
fa = Flashattn(sys.argv[1])
res = []
for d, n, causal in [(128, 512, 0), (128, 1024, 0), (64, 512, 0), (128, 16384, 0)]:
    h = 2048 // d; b = 16384 // n
    mk = lambda: torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16)
    q, k, v, do = mk(), mk(), mk(), mk()
    out = torch.empty_like(q); lse = torch.empty(b, h, n, device="cuda", dtype=torch.float32)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    qr, kr, vr = [t.clone().requires_grad_() for t in (q, k, v)]
    def cud_f():
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        o_c = F.scaled_dot_product_attention(qr, kr, vr, is_causal=bool(causal))
    fns = {"ours_fwd": fa.forward_call(q, k, v, out, lse, causal=causal),
           "ours_bwd": fa.backward_call(do, q, k, v, out, lse, dq, dk, dv, causal=causal),
           "cudnn_fwd": cud_f,
           "cudnn_bwd": lambda: torch.autograd.grad(o_c, (qr, kr, vr), do, retain_graph=True)}
    for name, fn in fns.items():
        for _ in range(5): fn()
        torch.cuda.synchronize()
        ts = []
        for _ in range(20):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(); fn(); e.record(); e.synchronize(); ts.append(s.elapsed_time(e))
        sync_ms = statistics.median(ts)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(20): fn()
        e.record(); e.synchronize(); b2b_ms = s.elapsed_time(e) / 20
        hs = []
        for _ in range(20):
            torch.cuda.synchronize(); t0 = time.perf_counter(); fn(); hs.append((time.perf_counter() - t0) * 1e3)
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(5): fn()
            torch.cuda.synchronize()
        kern = {}
        for ev in prof.events():
            if ev.device_type == torch.autograd.DeviceType.CUDA:
                kern[ev.name[:60]] = kern.get(ev.name[:60], 0) + ev.time_range.elapsed_us() / 5 / 1e3
        r = dict(d=d, n=n, causal=causal, name=name, sync_ms=sync_ms, b2b_ms=b2b_ms,
                 host_ms=statistics.median(hs), kernels_ms=kern, kernel_sum_ms=sum(kern.values()))
        res.append(r)
        print(f"D{d} N{n} c{causal} {name:10s} sync {sync_ms:.4f} b2b {b2b_ms:.4f} host {r['host_ms']:.4f} "
              f"kernels {r['kernel_sum_ms']:.4f} " + " ".join(f"{k[:40]}={v:.4f}" for k, v in kern.items()), flush=True)
json.dump(res, open(sys.argv[2], "w"), indent=1)
