"""flashattn's CPU backend beside PyTorch's CPU scaled_dot_product_attention, one process,
the same threads: forward and backward, fp32 and bf16 (fp16 on request), causal and not.

Both sides get the same [B, H, N, D] tensors (flashattn reads them through a transposed view,
no copy) and the same thread count. TFLOP/s by the contract's count (4*B*H*N*N*D forward,
halved for causal; backward 2.5x that).

Usage (the package installed, PyTorch present):
  python bench/cpu/bench_cpu.py [--threads 16] [--dtypes f32,bf16,f16] [--hdims 64,128]
      [--seqlens 1024,2048,4096,8192,16384] [--causal 0,1] [--heads 16] [--tokens 16384]
      [--no-bwd] [--repeats 3] [--json FILE]
"""
import argparse
import datetime
import json
import platform
import statistics
import time

import torch
import torch.nn.functional as F

import flashattn


def timed(fn, warmup, repeats):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def write_result(a, script, units, rows):
    """The run's rows with the date, host, versions and command, as JSON to a.json (if given)."""
    if not a.json:
        return
    result = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(), "host": platform.node(),
              "processor": platform.processor(), "threads": a.threads, "torch": torch.__version__,
              "flashattn": flashattn.__version__, "units": units,
              "command": f"python bench/cpu/{script} " + " ".join(f"--{k}={v}" for k, v in vars(a).items()),
              "rows": rows}
    with open(a.json, "w") as f:
        json.dump(result, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--dtypes", default="f32,bf16")
    ap.add_argument("--hdims", default="64,128")
    ap.add_argument("--seqlens", default="1024,2048,4096,8192,16384")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=16384, help="B*N per point (B at least 1)")
    ap.add_argument("--no-bwd", action="store_true")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    dtypes = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}

    rows = []
    print(f"{'dtype':>5} {'D':>4} {'causal':>6} {'N':>6} | {'ours fwd':>9} {'torch fwd':>9} {'ratio':>6} | "
          f"{'ours bwd':>9} {'torch bwd':>9} {'ratio':>6} | {'max|diff|':>9}", flush=True)
    for name in a.dtypes.split(","):
        dt = dtypes[name]
        for d in (int(x) for x in a.hdims.split(",")):
            for causal in (bool(int(x)) for x in a.causal.split(",")):
                for n in (int(x) for x in a.seqlens.split(",")):
                    b, h = max(1, a.tokens // n), a.heads
                    q, k, v = (torch.randn(b, h, n, d, dtype=dt) for _ in range(3))
                    qs, ks, vs = (t.transpose(1, 2) for t in (q, k, v))  # [B, N, H, D] views
                    flops = 4 * b * h * n * n * d / (2 if causal else 1)
                    row = {"dtype": name, "hdim": d, "causal": causal, "seqlen": n, "batch": b, "heads": h}

                    ours = lambda: flashattn.forward(qs, ks, vs, causal=causal, return_lse=True,  # noqa: E731
                                                     backend="cpu", num_threads=a.threads)
                    out, lse = ours()
                    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    row["max_abs_diff"] = (out.transpose(1, 2).float() - ref.float()).abs().max().item()
                    row["ours_fwd_ms"] = timed(ours, a.warmup, a.repeats)
                    row["torch_fwd_ms"] = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                                                a.warmup, a.repeats)
                    if not a.no_bwd:
                        do = torch.randn_like(q)
                        dos = do.transpose(1, 2)
                        row["ours_bwd_ms"] = timed(
                            lambda: flashattn.backward(dos, qs, ks, vs, out, lse, causal=causal, backend="cpu",
                                                       num_threads=a.threads), a.warmup, a.repeats)
                        qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
                        o = F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal)
                        row["torch_bwd_ms"] = timed(
                            lambda: torch.autograd.grad(o, (qg, kg, vg), do, retain_graph=True),
                            a.warmup, a.repeats)
                    for key in list(row):
                        if key.endswith("_fwd_ms"):
                            row[key.replace("_ms", "_tflops")] = flops / row[key] / 1e9
                        elif key.endswith("_bwd_ms"):
                            row[key.replace("_ms", "_tflops")] = 2.5 * flops / row[key] / 1e9
                    rows.append(row)
                    g = lambda key: row.get(key, float("nan"))  # noqa: E731
                    print(f"{name:>5} {d:>4} {int(causal):>6} {n:>6} | {g('ours_fwd_tflops'):9.3f} "
                          f"{g('torch_fwd_tflops'):9.3f} {g('ours_fwd_tflops') / g('torch_fwd_tflops'):6.2f} | "
                          f"{g('ours_bwd_tflops'):9.3f} {g('torch_bwd_tflops'):9.3f} "
                          f"{g('ours_bwd_tflops') / g('torch_bwd_tflops'):6.2f} | {row['max_abs_diff']:9.2e}",
                          flush=True)

    write_result(a, "bench_cpu.py", "TFLOP/s by the contract's count; ms are medians", rows)


if __name__ == "__main__":
    main()
