"""One decoding step over a partly filled KV cache on the CPU (or, with --device cuda, the
GPU): flashattn.torch's flash_attn_with_kvcache beside PyTorch's scaled_dot_product_attention,
one process, the same threads. On CUDA every step is timed to its end (synchronised): the
latency a decoding loop sees.

Each sequence b of the batch holds lens[b] keys of a cache of --cache rows (lengths drawn
once, uniformly in [cache / 4, cache - 1]); the step writes --new tokens' keys and values
into the caches and attends to lens[b] + new keys. flashattn reads the used rows only
(seqused_k). PyTorch, as a model does without per-sequence lengths in the kernel: the same
in-place writes, then SDPA over the whole cache with a boolean mask of the used keys, K and V
already repeated to the query heads outside the timing (PyTorch 2.4 has no enable_gqa); and,
for one new token, the best a caller can do there: one unmasked SDPA per sequence over its
used keys ("sliced"). Reported: ms per step (median) and GB/s of the used K and V (2 * sum(lens + new) * Hkv * D *
itemsize / time), the figure that bounds decoding.

Usage (the package installed, PyTorch present):
  python bench/cpu/bench_kvcache.py [--threads N] [--dtypes f32,bf16] [--batches 1,8]
      [--caches 4096,16384] [--new 1] [--heads 32] [--kv-heads 8] [--hdim 128] [--page N]
      [--device cpu|cuda] [--json FILE]
"""
import argparse

import torch
import torch.nn.functional as F

from bench_cpu import timed, write_result
from flashattn.torch import flash_attn_with_kvcache


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--dtypes", default="f32,bf16")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--caches", default="4096,16384")
    ap.add_argument("--new", type=int, default=1)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--hdim", type=int, default=128)
    ap.add_argument("--page", type=int, default=0, help="flashattn's cache paged in blocks of this many keys (0: not)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    dtypes = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
    h, hk, d, s_new = a.heads, a.kv_heads, a.hdim, a.new
    gen = torch.Generator().manual_seed(0)
    dev = torch.device(a.device)
    if a.device != "cpu":  # the CUDA backend computes fp16 / bf16
        a.dtypes = ",".join(n for n in a.dtypes.split(",") if n != "f32") or "bf16"

    def finished(fn):  # a step, to its end on the device
        def run():
            r = fn()
            if dev.type == "cuda":
                torch.cuda.synchronize()
            return r
        return run

    rows = []
    print(f"{'dtype':>5} {'B':>3} {'cache':>6} {'used':>7} | {'ours ms':>9} {'torch ms':>9} {'ratio':>6} | "
          f"{'ours GB/s':>9} {'torch GB/s':>10} | {'max|diff|':>9} | {'sliced ms':>9} {'ratio':>6}", flush=True)
    for name in a.dtypes.split(","):
        dt = dtypes[name]
        for b in (int(x) for x in a.batches.split(",")):
            for sc in (int(x) for x in a.caches.split(",")):
                # Lengths from their own seed: the same with and without --page.
                lens = torch.randint(sc // 4, sc - s_new + 1, (b,), dtype=torch.int32,
                                     generator=torch.Generator().manual_seed(1000 * sc + b)).to(dev)
                q = torch.randn(b, s_new, h, d, dtype=dt, device=dev)
                k_new, v_new = (torch.randn(b, s_new, hk, d, dtype=dt, device=dev) for _ in range(2))
                kc, vc = (torch.randn(b, sc, hk, d, dtype=dt, device=dev) for _ in range(2))
                # The peer's cache: [B, H, S, D], repeated to the query heads.
                kt, vt = (t.transpose(1, 2).repeat_interleave(h // hk, dim=1).contiguous() for t in (kc, vc))
                pos = lens.long()[:, None] + torch.arange(s_new, device=dev)
                bi = torch.arange(b, device=dev)[:, None]
                used = (lens + s_new).long()
                # Bottom-right causal over the used keys: new token t sees keys < lens + t + 1.
                mask = torch.arange(sc, device=dev)[None, None, :] < (lens.long()[:, None, None] +
                                                                      torch.arange(s_new, device=dev)[None, :, None] + 1)
                mask = mask[:, None]  # [B, 1, new, S]
                kn_t, vn_t = (t.transpose(1, 2).repeat_interleave(h // hk, dim=1) for t in (k_new, v_new))

                paged = {}
                if a.page:  # the same caches as shuffled blocks of a pool
                    n = b * sc // a.page
                    order = torch.randperm(n, generator=gen).to(dev)
                    pk, pv = (t.reshape(n, a.page, hk, d)[torch.argsort(order)].contiguous() for t in (kc, vc))
                    paged = dict(block_table=order.view(b, sc // a.page).to(torch.int32))

                def ours():
                    if a.page:
                        return flash_attn_with_kvcache(q, pk, pv, k_new, v_new, cache_seqlens=lens, causal=True, **paged)
                    return flash_attn_with_kvcache(q, kc, vc, k_new, v_new, cache_seqlens=lens, causal=True)

                def peer():
                    kt[bi, :, pos] = kn_t.transpose(1, 2)
                    vt[bi, :, pos] = vn_t.transpose(1, 2)
                    return F.scaled_dot_product_attention(q.transpose(1, 2), kt, vt, attn_mask=mask)

                def peer_sliced():  # one unmasked SDPA per sequence over its used keys (new = 1)
                    kt[bi, :, pos] = kn_t.transpose(1, 2)
                    vt[bi, :, pos] = vn_t.transpose(1, 2)
                    qt = q.transpose(1, 2)
                    return torch.cat([F.scaled_dot_product_attention(qt[i:i + 1], kt[i:i + 1, :, :n], vt[i:i + 1, :, :n])
                                      for i, n in enumerate(used.tolist())])

                diff = (ours().float() - peer().transpose(1, 2).float()).abs().max().item()
                row = {"dtype": name, "batch": b, "cache": sc, "page": a.page, "new": s_new, "lens": lens.tolist(), "heads": h,
                       "kv_heads": hk, "hdim": d, "max_abs_diff": diff,
                       "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu", "ours_ms": timed(finished(ours), a.warmup, a.repeats),
                       "torch_ms": timed(finished(peer), a.warmup, a.repeats)}
                if s_new == 1:
                    row["torch_sliced_ms"] = timed(finished(peer_sliced), a.warmup, a.repeats)
                    row["max_abs_diff_sliced"] = (ours().float() - peer_sliced().transpose(1, 2).float()).abs().max().item()
                kv_bytes = 2 * int(used.sum()) * hk * d * q.element_size()
                for side in ("ours", "torch"):
                    row[f"{side}_kv_gbs"] = kv_bytes / row[f"{side}_ms"] / 1e6
                rows.append(row)
                print(f"{name:>5} {b:>3} {sc:>6} {int(used.sum()):>7} | {row['ours_ms']:9.3f} {row['torch_ms']:9.3f} "
                      f"{row['torch_ms'] / row['ours_ms']:6.2f} | {row['ours_kv_gbs']:9.1f} "
                      f"{row['torch_kv_gbs']:10.1f} | {diff:9.2e} | {row.get('torch_sliced_ms', float('nan')):9.3f} "
                      f"{row.get('torch_sliced_ms', float('nan')) / row['ours_ms']:6.2f}", flush=True)

    write_result(a, "bench_kvcache.py", "ms are medians; ratio = torch_ms / ours_ms; GB/s of the used K and V", rows)


if __name__ == "__main__":
    main()
