"""flashattn's CPU forward on decoding shapes beside PyTorch's CPU scaled_dot_product_attention,
one process, the same threads: a few new query rows per sequence against a long KV cache,
grouped-query heads (the CPU forward's decoding path, src/backends/cpu/decode.cpp).

Both sides get the same tensors and no mask (every cached key is visible to the new rows, as
in decoding; PyTorch's is_causal aligns top-left, so it would not mean the same). PyTorch gets
K and V already repeated to the query heads, outside the timing (PyTorch 2.4 has no
enable_gqa); flashattn reads the kv heads as given. Reported: milliseconds (median) and the
K/V bytes read per second (2*B*Sk*Hkv*D*itemsize / time), the figure that bounds decoding.

Usage (the package installed, PyTorch present):
  python bench/cpu/bench_decode.py [--threads N] [--dtypes f32,bf16 (f16 too)] [--batches 1,8]
      [--sq 1,4,16] [--sk 1024,4096,16384] [--heads 32] [--kv-heads 8] [--hdim 128]
      [--repeats 10] [--json FILE]
"""
import argparse

import torch
import torch.nn.functional as F

import flashattn
from bench_cpu import timed, write_result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--dtypes", default="f32,bf16")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--sq", default="1,4,16")
    ap.add_argument("--sk", default="1024,4096,16384")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--hdim", type=int, default=128)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    dtypes = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
    h, hk, d = a.heads, a.kv_heads, a.hdim

    rows = []
    print(f"{'dtype':>5} {'B':>3} {'Sq':>4} {'Sk':>6} | {'ours ms':>9} {'torch ms':>9} {'ratio':>6} | "
          f"{'ours GB/s':>9} {'torch GB/s':>10} | {'max|diff|':>9}", flush=True)
    for name in a.dtypes.split(","):
        dt = dtypes[name]
        for b in (int(x) for x in a.batches.split(",")):
            for sq in (int(x) for x in a.sq.split(",")):
                for sk in (int(x) for x in a.sk.split(",")):
                    q = torch.randn(b, sq, h, d, dtype=dt)
                    k, v = (torch.randn(b, sk, hk, d, dtype=dt) for _ in range(2))
                    # PyTorch's layout [B, H, S, D], K and V repeated to the query heads.
                    qt = q.transpose(1, 2)
                    kt, vt = (t.transpose(1, 2).repeat_interleave(h // hk, dim=1) for t in (k, v))
                    ours = lambda: flashattn.forward(q, k, v, backend="cpu", num_threads=a.threads)  # noqa: E731
                    peer = lambda: F.scaled_dot_product_attention(qt, kt, vt)  # noqa: E731
                    diff = (ours().float() - peer().transpose(1, 2).float()).abs().max().item()
                    row = {"dtype": name, "batch": b, "seqlen_q": sq, "seqlen_k": sk, "heads": h, "kv_heads": hk,
                           "hdim": d, "max_abs_diff": diff,
                           "ours_ms": timed(ours, a.warmup, a.repeats), "torch_ms": timed(peer, a.warmup, a.repeats)}
                    kv_bytes = 2 * b * sk * hk * d * q.element_size()
                    for side in ("ours", "torch"):
                        row[f"{side}_kv_gbs"] = kv_bytes / row[f"{side}_ms"] / 1e6
                    rows.append(row)
                    print(f"{name:>5} {b:>3} {sq:>4} {sk:>6} | {row['ours_ms']:9.3f} {row['torch_ms']:9.3f} "
                          f"{row['torch_ms'] / row['ours_ms']:6.2f} | {row['ours_kv_gbs']:9.1f} "
                          f"{row['torch_kv_gbs']:10.1f} | {diff:9.2e}", flush=True)

    write_result(a, "bench_decode.py", "ms are medians; ratio = torch_ms / ours_ms; GB/s of K and V read once", rows)

if __name__ == "__main__":
    main()
