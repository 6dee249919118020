"""Random calls of flashattn.torch's functions (flash_attn_func, the qkv-packed and packed
variable-length forms, scaled_dot_product_attention), many of them wrong somewhere, with
and without gradients: each must return or raise ValueError / TypeError /
NotImplementedError naming its argument. It found a head dim of 0 failing in the default
scale (ZeroDivisionError) and a max_seqlen of 2**40 running the CPU backend out of memory."""

import random

import pytest

torch = pytest.importorskip("torch")
ft = pytest.importorskip("flashattn.torch")

EXPECTED = (ValueError, TypeError, NotImplementedError)


def _tensor(r, shape, dtype, grad):
    x = torch.randn(tuple(max(0, s) for s in shape))
    if x.numel() and r.random() < 0.1:
        x.view(-1)[0] = r.choice([float("nan"), float("inf"), 1e4])
    x = x.to(dtype)
    if x.dim() >= 3 and r.random() < 0.15:
        x = x.transpose(1, 2).contiguous().transpose(1, 2)  # strided heads
    return x.requires_grad_(grad and dtype.is_floating_point)


def _options(r, hq, batch):
    kw = {}
    if r.random() < 0.3:
        kw["causal"] = True
    if r.random() < 0.2:
        kw["window_size"] = r.choice([(3, 0), (-5, 2), (2**40, 0), (1,)])
    if r.random() < 0.2:
        kw["softcap"] = r.choice([5.0, -1.0, float("nan")])
    if r.random() < 0.2:
        kw["softmax_scale"] = r.choice([0.0, -1.0, float("nan"), 0.1])
    if r.random() < 0.2:
        kw["dropout_p"] = r.choice([0.1, 1.0, -0.1])
    if r.random() < 0.15:
        kw["alibi_slopes"] = torch.rand(r.choice([(hq,), (batch, hq), (hq + 1,)]))
    if r.random() < 0.1:
        kw["deterministic"] = True
    return kw


def _call(r):
    dtype = r.choice([torch.float32, torch.float16, torch.bfloat16] * 3 + [torch.float64, torch.int32])
    batch, sq, sk = r.choice([0, 1, 2]), r.choice([0, 1, 17, 64]), r.choice([0, 1, 33, 64])
    hkv = r.choice([1, 2])
    hq = hkv * r.choice([1, 2]) if r.random() < 0.9 else 3
    d = r.choice([8, 16, 64, 0, 7, 300])
    dv = d if r.random() < 0.8 else r.choice([16, 32])
    grad = r.random() < 0.5
    kind = r.choice(["func", "func", "varlen", "sdpa", "qkvpacked"])
    if kind == "sdpa":
        q, k = _tensor(r, (batch, hq, sq, d), dtype, grad), _tensor(r, (batch, hkv, sk, d), dtype, grad)
        v = _tensor(r, (batch, hkv, sk, dv), dtype, grad)
        kw = {"is_causal": r.random() < 0.3, "enable_gqa": hq != hkv or r.random() < 0.2}
        if r.random() < 0.2:
            kw["scale"] = r.choice([0.1, float("nan")])
        out = ft.scaled_dot_product_attention(q, k, v, **kw)
    else:
        kw = _options(r, hq, batch)
        if kind == "func":
            q, k = _tensor(r, (batch, sq, hq, d), dtype, grad), _tensor(r, (batch, sk, hkv, d), dtype, grad)
            out = ft.flash_attn_func(q, k, _tensor(r, (batch, sk, hkv, dv), dtype, grad), **kw)
        elif kind == "qkvpacked":
            out = ft.flash_attn_qkvpacked_func(_tensor(r, (batch, sq, 3, hq, d), dtype, grad), **kw)
        else:
            lens_q = [r.choice([0, 1, 7, 20]) for _ in range(max(batch, 1))]
            lens_k = [r.choice([0, 1, 9, 30]) for _ in range(max(batch, 1))]
            cu_q = torch.tensor([0] + torch.tensor(lens_q).cumsum(0).tolist(), dtype=torch.int32)
            cu_k = torch.tensor([0] + torch.tensor(lens_k).cumsum(0).tolist(), dtype=torch.int32)
            if r.random() < 0.15:
                cu_q = r.choice([cu_q.flip(0), cu_q.long(), cu_q + 3, cu_q[:1]])
            q = _tensor(r, (int(cu_q[-1]), hq, d), dtype, grad)
            k = _tensor(r, (int(cu_k[-1]), hkv, d), dtype, grad)
            v = _tensor(r, (int(cu_k[-1]), hkv, dv), dtype, grad)
            max_q = max(lens_q) if r.random() < 0.85 else r.choice([0, -1, 2**40])
            out = ft.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, max(lens_k), **kw)
    if grad and out.requires_grad:
        out.float().sum().backward()


@pytest.mark.parametrize("seed", range(4))
def test_random_calls_return_or_refuse_by_name(seed):
    r = random.Random(seed)
    torch.manual_seed(seed)
    for _ in range(150):
        try:
            _call(r)
        except EXPECTED as e:
            assert getattr(e, "argument", None), f"{type(e).__name__} without an argument: {e}"
