"""Quick correctness check of flashattn's CUDA forward and backward through the
benchmark shim, against a float64 reference computed with PyTorch on the GPU,
with the contract's accuracy rule (error at most 2x the naive computation's in
the same dtype, plus a small atol). For a GPU machine without GoogleTest: the
full suite (tests/unit) remains the real check.

Usage: python bench/gpu/check_shim.py --shim build/bench/gpu/libflashattn_bench_shim.so
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_gpu import Flashattn  # noqa: E402  (the shim wrapper, next to this file)


def reference(q, k, v, do, causal, dtype):
    """Forward and gradients in `dtype` (float64: the oracle; bf16/fp16: the naive,
    upcast-free computation), GQA by repeating K/V heads, causal bottom-right aligned."""
    q, k, v, do = (t.detach().to(dtype).requires_grad_(t is not do) for t in (q, k, v, do))
    g = q.shape[1] // k.shape[1]
    kk, vv = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
    s = (q @ kk.transpose(-1, -2)) * q.shape[-1] ** -0.5
    if causal:
        sq, sk = q.shape[2], k.shape[2]
        i = torch.arange(sq, device=q.device)[:, None]
        j = torch.arange(sk, device=q.device)[None, :]
        s = s.masked_fill(j > i + sk - sq, float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    o = p @ vv
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), do)
    return o.detach(), dq, dk, dv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shim", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fwd-only", action="store_true", help="check the forward alone")
    ap.add_argument("--fwd-sm80", action="store_true",
                    help="run the forward on the sm80 kernel (FLASHATTN_FORCE_SM80 around it): checks the backward alone")
    ap.add_argument("--dtypes", default="bf16,fp16")
    ap.add_argument("--hdims", default="64,128,256",
                    help="head dims to check (a build with FLASHATTN_CUDA_HEAD_DIMS has only its own)")
    a = ap.parse_args()
    fa = Flashattn(a.shim)
    torch.manual_seed(a.seed)
    dev = torch.device("cuda")
    # (B, Hq, Hkv, Sq, Sk, D, causal)
    cases = [(2, 4, 4, 1000, 1000, d, c) for d in (64, 128) for c in (False, True)]
    cases += [(1, 8, 2, 517, 300, 128, True), (1, 4, 1, 100, 1030, 64, True), (3, 2, 2, 1, 7, 128, False),
              (1, 2, 2, 239, 1023, 64, False), (2, 6, 3, 113, 113, 128, True), (1, 4, 4, 4096, 4096, 128, True),
              (1, 2, 1, 200, 1, 64, True), (1, 16, 16, 17, 2048, 128, False)]
    # More tiles than the H200's 132 SMs, so persistent blocks take several tiles
    # each (hd64: 192 query rows a tile, hd256: 128): causal (heaviest first, snake)
    # and plain with grouped heads.
    cases += [(2, 8, 8, 2048, 2048, 64, True), (1, 16, 4, 3000, 3000, 64, False), (2, 8, 8, 2048, 2048, 256, True)]
    # Long sequences on the wider key tiles (long_tile_config: hd128 from 2048 keys,
    # hd256 from 1024; 8192 with a causal mask), several tiles per block.
    cases += [(1, 16, 16, 4096, 4096, 128, False), (1, 8, 8, 8192, 8192, 128, True),
              (2, 8, 8, 2048, 2048, 256, False), (1, 4, 2, 8192, 8192, 256, True)]
    cases = [c for c in cases if c[5] in {int(x) for x in a.hdims.split(",")}]
    failed = 0
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}
    for dt in (dtypes[x] for x in a.dtypes.split(",")):
        for (b, hq, hk, sq, sk, d, causal) in cases:
            q = torch.randn(b, hq, sq, d, device=dev, dtype=dt)
            k = torch.randn(b, hk, sk, d, device=dev, dtype=dt)
            v = torch.randn(b, hk, sk, d, device=dev, dtype=dt)
            do = torch.randn(b, hq, sq, d, device=dev, dtype=dt)
            out = torch.empty_like(q)
            lse = torch.empty(b, hq, sq, device=dev, dtype=torch.float32)
            dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
            print(f"  case B{b} H{hq}/{hk} S{sq}x{sk} D{d} causal={causal}", flush=True)
            if a.fwd_sm80:
                os.environ["FLASHATTN_FORCE_SM80"] = "1"
            fa.forward(q, k, v, out, lse, causal=causal)
            torch.cuda.synchronize()
            os.environ.pop("FLASHATTN_FORCE_SM80", None)
            if not a.fwd_only:
                fa.backward(do, q, k, v, out, lse, dq, dk, dv, causal=causal)
            torch.cuda.synchronize()
            want = reference(q, k, v, do, causal, torch.float64)
            naive = reference(q, k, v, do, causal, dt)
            msgs = []
            names = ("out",) if a.fwd_only else ("out", "dq", "dk", "dv")
            for name, got, w, n in zip(names, (out, dq, dk, dv), want, naive):
                err = (got.double() - w).abs().max().item()
                bound = 2 * (n.double() - w).abs().max().item() + 1e-3 * max(1.0, w.abs().max().item())
                ok = err <= bound
                failed += not ok
                msgs.append(f"{name} {err:.2e}/{bound:.2e}{'' if ok else ' FAIL'}")
            print(f"{str(dt)[6:]:>8} B{b} H{hq}/{hk} S{sq}x{sk} D{d} {'causal' if causal else 'full  '} | "
                  + " | ".join(msgs), flush=True)
    print("FAILED" if failed else "PASSED", failed)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
