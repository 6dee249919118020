# Where a call's time goes, flashattn (through the benchmark shim) beside cuDNN, bf16, the
# contract's grid shapes (B*N = 16384, H*D = 2048). Run from the repository root on the GPU machine:
#   python3 bench/gpu/kernel_timeline.py SHIM timeline D:N:CAUSAL[:1],...  per-kernel durations
#       (torch.profiler / CUPTI, 10 calls after 0.3 s of warm-up, real clocks, no replay)
#   python3 bench/gpu/kernel_timeline.py SHIM power D:N:CAUSAL[:1],...     TFLOP/s, power and SM clock
#       (nvidia-smi every 100 ms) over 2 s of back-to-back calls, each side twice
#   ncu --profile-from-start off ... python3 bench/gpu/kernel_timeline.py SHIM ncu D:N:CAUSAL,...
#       one call of each side between cudaProfilerStart / Stop
# PEER=flash compares with PyTorch's FlashAttention-2 instead of cuDNN (with
# FLASHATTN_FORCE_SM80=1: the portable kernels beside their namesake).
# A trailing :1 times the forward alone.
import os, sys, collections
sys.path.insert(0, "bench/gpu")
import torch, torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from bench_gpu import Flashattn
fa = Flashattn(sys.argv[1]); mode = sys.argv[2]
probs = [tuple(int(v) for v in s.split(":")) for s in sys.argv[3].split(",")]  # d:n:causal[:fwdonly]
def setup(d, n, c):
    b, h = 16384 // n, 2048 // d
    q, k, v, do = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    out = torch.empty_like(q); lse = torch.empty(b, h, n, device="cuda", dtype=torch.float32)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
    return q, k, v, do, out, lse, dq, dk, dv, qg, kg, vg
def ours(t, c, bwd=True):
    q, k, v, do, out, lse, dq, dk, dv = t[:9]
    fa.forward(q, k, v, out, lse, causal=bool(c))
    if bwd: fa.backward(do, q, k, v, out, lse, dq, dk, dv, causal=bool(c))
PEER = os.environ.get("PEER", "cudnn")
def cudnn(t, c, bwd=True):
    do, qg, kg, vg = t[3], t[9], t[10], t[11]
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION if PEER == "flash" else SDPBackend.CUDNN_ATTENTION]):
        o = F.scaled_dot_product_attention(qg, kg, vg, is_causal=bool(c))
    if bwd: torch.autograd.grad(o, (qg, kg, vg), do)
for pr in (probs if mode != "power" else []):
    d, n, c = pr[:3]; bwd = len(pr) < 4
    t = setup(d, n, c)
    for f in (ours, cudnn):
        for _ in range(3): f(t, c, bwd)
    torch.cuda.synchronize()
    if mode == "ncu":
        torch.cuda.profiler.start(); ours(t, c, bwd); cudnn(t, c, bwd); torch.cuda.synchronize(); torch.cuda.profiler.stop()
        continue
    for name, f in (("ours", ours), (PEER, cudnn)):
        # warm into the power-capped state, then profile 10 calls
        import time
        t0 = time.time()
        while time.time() - t0 < 0.3: f(t, c, bwd)
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(10): f(t, c, bwd)
            torch.cuda.synchronize()
        agg = collections.defaultdict(lambda: [0, 0.0])
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                a = agg[e.name[:90]]; a[0] += 1; a[1] += e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
        print(f"== d={d} n={n} causal={c} {name}")
        for k_, (cnt, us) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
            print(f"   {us / 10:9.1f} us/call  x{cnt / 10:.0f}  {k_}")
if mode == "power":
    import subprocess, time
    for pr in probs:
        d, n, c = pr[:3]; bwd = len(pr) < 4
        t = setup(d, n, c)
        for name, f in (("ours", ours), (PEER, cudnn), ("ours", ours), (PEER, cudnn)):
            f(t, c, bwd); torch.cuda.synchronize()
            smi = subprocess.Popen(["nvidia-smi", "--query-gpu=power.draw,clocks.sm,clocks_event_reasons.active",
                                    "--format=csv,noheader,nounits", "-lms", "100"], stdout=subprocess.PIPE, text=True)
            t0 = time.time(); calls = 0
            ev0 = torch.cuda.Event(enable_timing=True); ev1 = torch.cuda.Event(enable_timing=True)
            while time.time() - t0 < 0.5: f(t, c, bwd); calls += 0
            torch.cuda.synchronize(); ev0.record(); calls = 0
            t1 = time.time()
            while time.time() - t1 < 2.0: f(t, c, bwd); calls += 1
            ev1.record(); torch.cuda.synchronize()
            smi.terminate(); lines = smi.stdout.read().strip().splitlines()
            ms = ev0.elapsed_time(ev1) / calls
            fl = 4 * (16384 // n) * (2048 // d) * n * n * d * (0.5 if c else 1) * (3.5 if bwd else 1)
            vals = [l.split(",") for l in lines[5:]]  # skip the first 0.5 s
            pw = [float(v[0]) for v in vals if len(v) >= 2]; ck = [float(v[1]) for v in vals if len(v) >= 2]
            print(f"power d={d} n={n} c={c} {'fwd+bwd' if bwd else 'fwd'} {name:5s}: {fl / ms / 1e9:6.1f} TFLOP/s  "
                  f"power {sum(pw) / max(1, len(pw)):6.1f} W  sm clock {sum(ck) / max(1, len(ck)):6.0f} MHz  "
                  f"J/PFLOP {sum(pw) / max(1, len(pw)) * ms / 1e3 / (fl / 1e15):6.2f}  reasons {vals[-1][2] if vals and len(vals[-1]) > 2 else ''}")
