#!/usr/bin/env python3
"""Decoding steps on the GPU: flashattn beside PyTorch's FlashAttention-2 and cuDNN, one process.

One query token (or --sq tokens) per sequence against a full cache of Sk keys, GQA (32
query heads on 8 kv heads), D = 128, bf16: the shapes of shared/docs/peers.md's decode
table. Each side is captured in a CUDA graph of --calls calls and timed by replaying it
(CUDA events, median of --repeats replays), so the figure is GPU time, not the host's
launch cost, which at these sizes is larger than the kernels. Reported: microseconds a
call and the bandwidth the contract's decode table uses, K + V bytes of the kv heads /
time. "ours" is flashattn's decoding path (split-KV), "ours_tiled" the same call through
the tiled kernels (FLASHATTN_CUDA_DECODE=0); the peers take enable_gqa where they can,
otherwise K and V repeated to the query heads (outside the timing).

--used F: the caches are filled to F of their Sk keys (seqused_k, the same for every
sequence, ending inside a key tile); the peers run on the used keys alone. Several
tokens a step (causal) are checked against SDPA with the step's mask made explicit. With --sq of
more than 64 / (query heads per kv head) rows this times prefill into a cache, which takes
the tiled kernels: on H100 / H200 the Hopper forward, FLASHATTN_FORCE_SM80=1 the sm80 one.

    python3 bench/gpu/bench_decode.py --shim build/bench/gpu/libflashattn_bench_shim.so --json out.json
"""
import argparse
import ctypes
import datetime
import json
import os
import platform
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_gpu import Flashattn  # noqa: E402


def graph_time_us(make_call, calls, warmup, repeats):
    """Median microseconds a call, from replays of a graph of `calls` calls."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn = make_call()
        for _ in range(3):  # outside the capture: lazy initialisation, pools
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn = make_call()  # built on the capture stream
        for _ in range(calls):
            fn()
    for _ in range(warmup):
        g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        g.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0 / calls)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shim", required=True)
    ap.add_argument("--shapes", default="1x32768,8x8192,32x4096,64x16384", help="B x Sk, comma-separated")
    ap.add_argument("--sq", default="1", help="query tokens per sequence, comma-separated")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--hdim", type=int, default=128)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--no-tiled", action="store_true", help="skip flashattn's tiled kernels")
    ap.add_argument("--used", type=float, default=0.0,
                    help="fill the caches to this fraction of Sk (seqused_k); 0: full caches, no seqused_k")
    ap.add_argument("--json")
    a = ap.parse_args()
    fa = Flashattn(a.shim)
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[a.dtype]
    h, hk, d = a.heads, a.kv_heads, a.hdim
    gen = torch.Generator(device="cuda").manual_seed(0)
    rows = []
    print(f"{'B':>3} {'Sk':>6} {'Sq':>3} | " + " ".join(f"{n:>17}" for n in ("ours", "ours_tiled", "flash", "cudnn"))
          + " | ours/flash ours/cudnn  max|diff|   (us a call, TB/s)")
    for shape in a.shapes.split(","):
        b, sk = (int(x) for x in shape.split("x"))
        for sq in (int(x) for x in a.sq.split(",")):
            q = torch.randn(b, h, sq, d, device="cuda", dtype=dt, generator=gen)
            k = torch.randn(b, hk, sk, d, device="cuda", dtype=dt, generator=gen)
            v = torch.randn(b, hk, sk, d, device="cuda", dtype=dt, generator=gen)
            out = torch.empty_like(q)
            used = sk
            if a.used > 0:
                used = max(1, min(sk, int(sk * a.used) - 37))  # inside a key tile
                seqused = torch.full((b,), used, dtype=torch.int32, device="cuda")
                fa.lib.fa_set_seqused_k(ctypes.c_void_p(seqused.data_ptr()), ctypes.c_int64(b), 0)
                k_used, v_used = k[:, :, :used], v[:, :, :used]
            else:  # (older shims have no fa_set_seqused_k; it is never set in this process)
                k_used, v_used = k, v
            kv_bytes = 2 * k_used.numel() * k.element_size()
            causal = sq > 1  # several new tokens: each sees the cache and the tokens before it
            row = {"B": b, "Sk": sk, "Sq": sq, "Hq": h, "Hkv": hk, "D": d, "dtype": a.dtype, "kv_bytes": kv_bytes,
                   "seqused_k": used if a.used > 0 else None}

            def ours():
                return fa.forward_call(q, k, v, out, causal=causal)

            # The tiled path is chosen when the call is made: capture with the switch set.
            def tiled_call():
                fn = fa.forward_call(q, k, v, out, causal=causal)

                def run():
                    os.environ["FLASHATTN_CUDA_DECODE"] = "0"
                    try:
                        fn()
                    finally:
                        os.environ.pop("FLASHATTN_CUDA_DECODE", None)
                return run

            fa.forward(q, k, v, out, causal=causal)
            torch.cuda.synchronize()
            got = out.float().clone()
            times = {"ours": graph_time_us(ours, a.calls, a.warmup, a.repeats)}
            if not a.no_tiled:
                times["ours_tiled"] = graph_time_us(tiled_call, a.calls, a.warmup, a.repeats)
            ref = None

            def repeated():  # K and V repeated to the query heads (for SDPA without enable_gqa)
                return k_used.repeat_interleave(h // hk, dim=1), v_used.repeat_interleave(h // hk, dim=1)

            for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                if causal:  # the peers' causal mask is top-left aligned; a decode step's is bottom-right
                    times[name] = float("nan")
                    continue
                try:
                    gqa_ok = True
                    with sdpa_kernel([backend]):
                        try:
                            r = F.scaled_dot_product_attention(q, k_used, v_used, enable_gqa=True)
                        except RuntimeError:
                            gqa_ok = False
                            kr, vr = repeated()
                            r = F.scaled_dot_product_attention(q, kr, vr)
                    ref = r.float() if ref is None else ref
                    row[f"{name}_enable_gqa"] = gqa_ok
                    if gqa_ok:
                        def make(backend=backend):
                            def run():
                                with sdpa_kernel([backend]):
                                    return F.scaled_dot_product_attention(q, k_used, v_used, enable_gqa=True)
                            return run
                    else:
                        def make(backend=backend, kr=kr, vr=vr):
                            def run():
                                with sdpa_kernel([backend]):
                                    return F.scaled_dot_product_attention(q, kr, vr)
                            return run
                    times[name] = graph_time_us(make, a.calls, a.warmup, a.repeats)
                except RuntimeError as e:
                    row[f"{name}_error"] = str(e)[:200]
                    times[name] = float("nan")
            if ref is None and causal:
                # Not timed, only checked: the decode step's causal mask aligned bottom-right
                # (row i sees keys up to used - sq + i) as an explicit mask.
                q_pos = torch.arange(sq, device="cuda")[:, None] + (used - sq)
                mask = torch.arange(used, device="cuda")[None, :] <= q_pos
                try:
                    with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
                        kr, vr = repeated()
                        ref = F.scaled_dot_product_attention(q, kr, vr, attn_mask=mask).float()
                except RuntimeError as e:
                    row["check_error"] = str(e)[:200]
            diff = (got - ref).abs().max().item() if ref is not None else float("nan")
            row.update({f"{n}_us": t for n, t in times.items()})
            row.update({f"{n}_tbps": kv_bytes / (t * 1e-6) / 1e12 for n, t in times.items()})
            row["max_abs_diff_vs_peer"] = diff
            rows.append(row)
            cells = " ".join(f"{times.get(n, float('nan')):8.1f} {kv_bytes / (times.get(n, float('nan')) * 1e-6) / 1e12:7.2f}"
                             for n in ("ours", "ours_tiled", "flash", "cudnn"))
            print(f"{b:>3} {sk:>6} {sq:>3} | {cells} | {times.get('flash', float('nan')) / times['ours']:10.2f} "
                  f"{times.get('cudnn', float('nan')) / times['ours']:10.2f} {diff:10.2e}", flush=True)
    if a.json:
        meta = {"date": datetime.date.today().isoformat(), "gpu": torch.cuda.get_device_name(),
                "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(), "host": platform.node(),
                "command": " ".join(sys.argv)}
        with open(a.json, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
