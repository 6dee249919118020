#!/usr/bin/env python3
"""flashattn on the GPU beside PyTorch's FlashAttention-2 and cuDNN, one process.

The contract's grid: bf16, B*N = 16384, Hq*D = 2048, N in 512..16384, D in
{64, 128, 256}, causal and not. Tensors are allocated as [B, H, N, D] (the
layout scaled_dot_product_attention takes) and handed to flashattn through
strides, without copies. Times are CUDA-event medians after warm-up; TFLOP/s use
the contract's count (fwd 4*B*H*N^2*D, halved for causal; bwd 2.5x fwd).

By default each side of a point (ours, the sm80 kernels with --sm80-too,
FlashAttention-2, cuDNN; forward and backward) is timed on its own, one after
the other, as the peers' figures in shared/docs/peers.md were: median of
--repeats calls after --warmup calls and --warmup-ms of back-to-back calls.
The H200 boosts for ~0.1 s after idling and then holds its power cap (~10%
slower on long problems), so with --warmup-ms 250 every side is timed in its
own sustained state, set by its own power draw. --interleave instead times all
sides of a point in turns (round-robin warm-up, then --rounds rounds of each
side's calls; medians over all of a side's calls): they share one clock, which
the mix of their power draws sets, so it compares the kernels nearer per clock
(bench/results/2026-12-01_h200_bench_interleaved_s14.json: every side faster
than timed alone, the mix drawing less than the cap). In a fixed order each side
follows the same neighbour every round, and a side that follows a light one
(FlashAttention-2) meets a cooler clock; --rotate starts each round one side
later, so every side takes every place in turn. --idle-ms sleeps before each
side's timing, so each side starts from the same rested (boosted) state.
--trace N times N calls of each side from rest with the SM clock and power read
after each (NVML), from boost into the cap. NVML's power is an average that lags
the calls (session 49): read the calls' times and the clock, not the power.

    python3 bench/gpu/bench_gpu.py --shim build/bench/gpu/libflashattn_bench_shim.so \
        --json bench/results/x.json --png bench/results/x.png
"""
import argparse
import ctypes
import datetime
import json
import os
import platform
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


class Flashattn:
    """flashattn's forward through the C shim."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        f = self.lib.fa_forward
        i64p = ctypes.POINTER(ctypes.c_int64)
        f.argtypes = ([ctypes.c_void_p, i64p, i64p] * 4 +
                      [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int64,
                       ctypes.c_int64, ctypes.c_float, ctypes.c_float, ctypes.c_uint64,
                       ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int])
        f.restype = ctypes.c_int
        g = self.lib.fa_backward
        g.argtypes = ([ctypes.c_void_p] * 9 + [i64p] * 6 +
                      [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                       ctypes.c_char_p, ctypes.c_int])
        g.restype = ctypes.c_int
        self.err = ctypes.create_string_buffer(1024)

    @staticmethod
    def _bshd(t):
        """Shape and strides of a [B, H, N, D] tensor seen as [B, N, H, D]."""
        b, h, n, d = t.shape
        s = t.stride()
        shape = (ctypes.c_int64 * 4)(b, n, h, d)
        stride = (ctypes.c_int64 * 4)(s[0], s[2], s[1], s[3])
        return shape, stride

    def forward_call(self, q, k, v, out, lse=None, causal=False, window=(-1, -1), softcap=0.0):
        """A callable that runs this forward. The ctypes arguments are built once:
        marshalling 24 of them per call costs Python 15-30 us (more than the C API's
        own ~8 us, bench/gpu/host_overhead.py), which a C++ caller never pays."""
        args = []
        for t in (q, k, v, out):
            shape, stride = self._bshd(t)
            args += [ctypes.c_void_p(t.data_ptr()), shape, stride]
        dtype = 1 if q.dtype == torch.float16 else 2
        stream = torch.cuda.current_stream().cuda_stream
        args += [ctypes.c_void_p(lse.data_ptr() if lse is not None else 0), dtype, q.device.index or 0,
                 int(causal), window[0], window[1], softcap, 0.0, 0, ctypes.c_void_p(stream), self.err, 1024]
        return self._checked(self.lib.fa_forward, args)

    def forward(self, q, k, v, out, lse=None, causal=False, window=(-1, -1), softcap=0.0):
        self.forward_call(q, k, v, out, lse, causal, window, softcap)()

    def backward_call(self, do, q, k, v, out, lse, dq, dk, dv, causal=False, deterministic=False):
        """All tensors [B, H, N, D] with the same strides (q's for dq/dout/out); as forward_call."""
        qs, qst = self._bshd(q)
        ks, kst = self._bshd(k)
        vs, vst = self._bshd(v)
        ptr = lambda t: ctypes.c_void_p(t.data_ptr())
        dtype = 1 if q.dtype == torch.float16 else 2
        stream = torch.cuda.current_stream().cuda_stream
        args = [ptr(do), ptr(q), ptr(k), ptr(v), ptr(out), ptr(lse), ptr(dq), ptr(dk), ptr(dv), qs, qst, ks,
                kst, vs, vst, dtype, q.device.index or 0, int(causal), int(deterministic),
                ctypes.c_void_p(stream), self.err, 1024]
        return self._checked(self.lib.fa_backward, args)

    def backward(self, do, q, k, v, out, lse, dq, dk, dv, causal=False, deterministic=False):
        self.backward_call(do, q, k, v, out, lse, dq, dk, dv, causal, deterministic)()

    def _checked(self, fn, args):
        err = self.err

        def call():
            if fn(*args) != 0:
                raise RuntimeError(err.value.decode())
        return call


# Seconds of repeated calls (each waited for) before each timing (--warmup-ms). The
# H200 runs boosted for about 0.1 s after idling and then holds its power cap (~10%
# slower on long problems; bench/results/2026-11-30_h200_lib_vs_sweep_s8.txt): with
# a warm-up this long every side is timed in the capped state (other scripts that
# import time_ms set bench_gpu.WARMUP_S). It adds that much per
# timed side and point, so a full grid needs a longer BENCH_LIMIT in gpu_session.sh.
WARMUP_S = 0.0


# Seconds of sleep before each side's timing (--idle-ms): the GPU's clock recovers
# from the previous side's power draw, so each side starts from the same state.
IDLE_S = 0.0


def rest():
    """IDLE_S of sleep with the GPU idle (--idle-ms)."""
    if IDLE_S > 0:
        torch.cuda.synchronize()
        time.sleep(IDLE_S)


def time_call(fn):
    """One call of fn in ms, by CUDA events, waited for."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def time_interleaved(fns, warmup, repeats, rounds, rotate=False):
    """Medians in ms of each of fns (name -> callable), timed in turns; with rotate,
    round r starts at side r (mod the number of sides)."""
    rest()
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < WARMUP_S:
        for fn in fns.values():
            fn()
        torch.cuda.synchronize()
    times = {name: [] for name in fns}
    per_round = max(1, repeats // rounds)
    order = list(fns.items())
    for r in range(rounds):
        shift = r % len(order) if rotate else 0
        for name, fn in order[shift:] + order[:shift]:
            for _ in range(per_round):
                times[name].append(time_call(fn))
    return {name: statistics.median(t) for name, t in times.items()}


def clock_reader():
    """A function giving the GPU's SM clock (MHz) and power draw (W) now, through NVML
    (nan where NVML is missing or does not answer)."""
    try:
        import pynvml
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
        return lambda: (pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
                        pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0)
    except Exception:  # noqa: BLE001 - any NVML failure leaves the trace without clocks
        return lambda: (float("nan"), float("nan"))


def trace_calls(fn, calls, read_clock):
    """fn called `calls` times back to back after IDLE_S of rest (no warm-up): each
    call's ms with the SM clock and power read right after it, from the boost after
    idling into the power-capped state."""
    rest()
    return [(time_call(fn), *read_clock()) for _ in range(calls)]


def time_ms(fn, warmup, repeats):
    """Median in ms of fn's calls, after warm-up (WARMUP_S of back-to-back calls too)."""
    return time_interleaved({"fn": fn}, warmup, repeats, 1)["fn"]


def forced_sm80(fn):
    """fn with the portable kernels (dispatch would pick the Hopper ones)."""
    def call():
        os.environ["FLASHATTN_FORCE_SM80"] = "1"
        try:
            fn()
        finally:
            del os.environ["FLASHATTN_FORCE_SM80"]
    return call


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shim", required=True)
    ap.add_argument("--hdims", default="64,128,256")
    ap.add_argument("--seqlens", default="512,1024,2048,4096,8192,16384")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--model-dim", type=int, default=2048)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--warmup-ms", type=float, default=0.0,
                    help="also run each timed call back to back this long first (the GPU's power-capped state)")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--no-bwd", action="store_true", help="skip the peers' backward")
    ap.add_argument("--fwd-only", action="store_true", help="skip every backward, ours too")
    ap.add_argument("--sm80-too", action="store_true",
                    help="also time our forward and backward with the portable sm80 kernels (ours_sm80_*)")
    ap.add_argument("--deterministic", action="store_true",
                    help="also time our backward in deterministic mode (ours_bwd_det_*)")
    ap.add_argument("--memory", action="store_true",
                    help="also run B=1, H=16, D=128, N=131072 causal and report the extra device memory")
    ap.add_argument("--no-peers", action="store_true",
                    help="time flashattn alone (A/B runs of two builds: scripts/gpu_ab_bench.sh)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (repeats are split among them)")
    ap.add_argument("--interleave", action="store_true", help="time the sides of a point in turns (one clock for all)")
    ap.add_argument("--rotate", action="store_true", help="with --interleave: each round starts one side later")
    ap.add_argument("--idle-ms", type=float, default=0.0, help="sleep before each side's timing (a rested GPU)")
    ap.add_argument("--trace", type=int, default=0,
                    help="each side: this many calls from a rested GPU (--idle-ms), each with the SM clock and power; "
                         "the JSON keeps every call, the table the median")
    ap.add_argument("--json")
    ap.add_argument("--png")
    args = ap.parse_args()
    global WARMUP_S, IDLE_S
    WARMUP_S = args.warmup_ms / 1000.0
    IDLE_S = args.idle_ms / 1000.0

    fa = Flashattn(args.shim)
    dev = torch.device("cuda")
    rows = []
    print(f"{'D':>4} {'causal':>6} {'N':>6} | {'ours fwd':>9} {'sm80 fwd':>9} {'flash fwd':>9} {'cudnn fwd':>9} | "
          f"{'ours bwd':>9} {'sm80 bwd':>9} {'flash bwd':>9} {'cudnn bwd':>9} | {'fwd/FA2':>7} {'fwd/cuDNN':>9} {'bwd/FA2':>7} {'bwd/cuDNN':>9} "
          f"{'max|diff|':>9}")
    for d in [int(x) for x in args.hdims.split(",")]:
        for causal in [bool(int(x)) for x in args.causal.split(",")]:
            for n in [int(x) for x in args.seqlens.split(",")]:
                b, h = max(1, args.tokens // n), args.model_dim // d
                q, k, v = (torch.randn(b, h, n, d, device=dev, dtype=torch.bfloat16) for _ in range(3))
                out = torch.empty_like(q)
                lse = torch.empty(b, h, n, device=dev, dtype=torch.float32)
                flops = 4 * b * h * n * n * d / (2 if causal else 1)
                row = {"hdim": d, "causal": causal, "seqlen": n, "batch": b, "heads": h}

                fa.forward(q, k, v, out, lse, causal=causal)
                with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                row["max_abs_diff_vs_flash"] = (out.float() - ref.float()).abs().max().item()
                fns = {"ours_fwd": fa.forward_call(q, k, v, out, lse, causal=causal)}
                if args.sm80_too:
                    fns["ours_sm80_fwd"] = forced_sm80(fns["ours_fwd"])
                if not args.fwd_only:
                    do = torch.randn_like(q)
                    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
                    fa.backward(do, q, k, v, out, lse, dq, dk, dv, causal=causal)
                    qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
                    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                        rq, rk, rv = torch.autograd.grad(
                            F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal), (qg, kg, vg), do)
                    row["max_abs_diff_dq_vs_flash"] = (dq.float() - rq.float()).abs().max().item()
                    row["max_abs_diff_dk_vs_flash"] = (dk.float() - rk.float()).abs().max().item()
                    row["max_abs_diff_dv_vs_flash"] = (dv.float() - rv.float()).abs().max().item()
                    fns["ours_bwd"] = fa.backward_call(do, q, k, v, out, lse, dq, dk, dv, causal=causal)
                    if args.sm80_too:
                        fns["ours_sm80_bwd"] = forced_sm80(fns["ours_bwd"])
                    if args.deterministic:
                        fns["ours_bwd_det"] = fa.backward_call(do, q, k, v, out, lse, dq, dk, dv, causal=causal,
                                                               deterministic=True)
                peers = () if args.no_peers else (("flash", SDPBackend.FLASH_ATTENTION),
                                                   ("cudnn", SDPBackend.CUDNN_ATTENTION))
                for name, backend in peers:
                    def peer_fwd(backend=backend):
                        with sdpa_kernel([backend]):
                            F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    try:
                        peer_fwd()  # a peer without a kernel for the problem (a head dim) is left out
                    except RuntimeError as e:
                        print(f"  {name}: {str(e).splitlines()[0][:100]}", flush=True)
                        continue
                    fns[f"{name}_fwd"] = peer_fwd
                    if not (args.no_bwd or args.fwd_only):
                        qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
                        with sdpa_kernel([backend]):
                            o = F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal)
                        do_peer = torch.randn_like(o)
                        peer_bwd = (lambda o=o, qg=qg, kg=kg, vg=vg, do_peer=do_peer:
                                    torch.autograd.grad(o, (qg, kg, vg), do_peer, retain_graph=True))
                        try:
                            peer_bwd()
                            fns[f"{name}_bwd"] = peer_bwd
                        except RuntimeError as e:
                            print(f"  {name} bwd: {str(e).splitlines()[0][:100]}", flush=True)
                if args.trace:
                    read_clock = clock_reader()
                    for name, fn in fns.items():
                        samples = trace_calls(fn, args.trace, read_clock)
                        row[f"{name}_trace"] = samples
                        row[f"{name}_ms"] = statistics.median(ms for ms, _, _ in samples)
                        work = (2.5 if "_bwd" in name else 1.0) * flops / 1e9
                        first, last = samples[:5], samples[-20:]
                        med = lambda part, i: statistics.median(x[i] for x in part)
                        print(f"  {name:>10}: first 5 calls {work / med(first, 0):6.1f} TFLOP/s at {med(first, 1):5.0f} MHz "
                              f"{med(first, 2):4.0f} W; last 20 {work / med(last, 0):6.1f} at {med(last, 1):5.0f} MHz "
                              f"{med(last, 2):4.0f} W", flush=True)
                elif args.interleave:
                    for name, ms in time_interleaved(fns, args.warmup, args.repeats, args.rounds, args.rotate).items():
                        row[f"{name}_ms"] = ms
                else:
                    for name, fn in fns.items():
                        row[f"{name}_ms"] = time_ms(fn, args.warmup, args.repeats)
                del fns
                for key in list(row):
                    if key.endswith("_fwd_ms"):
                        row[key.replace("_ms", "_tflops")] = flops / row[key] / 1e9
                    elif key.endswith("_ms") and "_bwd" in key:
                        row[key.replace("_ms", "_tflops")] = 2.5 * flops / row[key] / 1e9
                rows.append(row)
                g = lambda key: row.get(key, float("nan"))
                print(f"{d:>4} {int(causal):>6} {n:>6} | {g('ours_fwd_tflops'):9.1f} {g('ours_sm80_fwd_tflops'):9.1f} "
                      f"{g('flash_fwd_tflops'):9.1f} {g('cudnn_fwd_tflops'):9.1f} | "
                      f"{g('ours_bwd_tflops'):9.1f} {g('ours_sm80_bwd_tflops'):9.1f} {g('flash_bwd_tflops'):9.1f} {g('cudnn_bwd_tflops'):9.1f} | "
                      f"{g('ours_fwd_tflops') / g('flash_fwd_tflops'):7.2f} "
                      f"{g('ours_fwd_tflops') / g('cudnn_fwd_tflops'):9.2f} "
                      f"{g('ours_bwd_tflops') / g('flash_bwd_tflops'):7.2f} {g('ours_bwd_tflops') / g('cudnn_bwd_tflops'):9.2f} "
                      f"{row['max_abs_diff_vs_flash']:9.2e}", flush=True)
                del q, k, v, out, lse
                torch.cuda.empty_cache()

    memory = long_sequence_memory(fa) if args.memory else None

    result = {
        "memory_n131072": memory,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version(),
        "host": platform.node(),
        "command": " ".join(sys.argv),
        "dtype": "bf16",
        "units": "TFLOP/s by the contract's count; times are medians in ms",
        "rows": rows,
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if args.png:
        plot(rows, args.png, result["gpu"])


def long_sequence_memory(fa):
    """Extra device memory of a causal forward at N = 131072 beyond q, k, v, out, lse."""
    b, h, n, d = 1, 16, 131072, 128
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    out = torch.empty_like(q)
    lse = torch.empty(b, h, n, device="cuda", dtype=torch.float32)
    torch.cuda.synchronize()
    free_before, _ = torch.cuda.mem_get_info()
    fa.forward(q, k, v, out, lse, causal=True)
    torch.cuda.synchronize()
    free_after, _ = torch.cuda.mem_get_info()
    ms = time_ms(lambda: fa.forward(q, k, v, out, lse, causal=True), 1, 3)
    res = {"batch": b, "heads": h, "seqlen": n, "hdim": d, "causal": True,
           "extra_bytes": int(free_before - free_after),
           "out_plus_lse_bytes": out.numel() * 2 + lse.numel() * 4,
           "fwd_ms": ms, "fwd_tflops": 2 * b * h * n * n * d / ms / 1e9}
    print(f"N=131072 causal fwd: {ms:.1f} ms, {res['fwd_tflops']:.1f} TFLOP/s, extra device memory "
          f"{res['extra_bytes'] / 2**20:.1f} MiB beyond inputs, out and LSE "
          f"({res['out_plus_lse_bytes'] / 2**20:.0f} MiB)")
    return res


def plot(rows, path, gpu):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    keys = sorted({(r["hdim"], r["causal"]) for r in rows})
    fig, axes = plt.subplots(2, len(keys), figsize=(4 * len(keys), 7), squeeze=False)
    for col, (d, causal) in enumerate(keys):
        sel = [r for r in rows if r["hdim"] == d and r["causal"] == causal]
        ns = [r["seqlen"] for r in sel]
        for row_i, mode in enumerate(("fwd", "bwd")):
            ax = axes[row_i][col]
            for impl, label in (("ours", "flashattn"), ("ours_sm80", "flashattn sm80"),
                                ("flash", "FA2 (PyTorch)"), ("cudnn", "cuDNN")):
                if not any(f"{impl}_{mode}_tflops" in r for r in sel):
                    continue
                ax.plot(ns, [r.get(f"{impl}_{mode}_tflops", float("nan")) for r in sel], marker="o", label=label)
            ax.set_xscale("log", base=2)
            ax.set_title(f"{mode} D={d} {'causal' if causal else 'full'}")
            ax.set_xlabel("N")
            ax.set_ylabel("TFLOP/s")
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"bf16, {gpu}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
