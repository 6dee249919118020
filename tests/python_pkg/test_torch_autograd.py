"""flashattn.torch on CPU tensors: autograd gradients against the float64 oracle and
PyTorch's math SDPA in float64, through both the eager path and the registered ops."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import flashattn.torch as ft  # noqa: E402
from flashattn import _torch_ops as ops  # noqa: E402
from fa_check import packed_lengths  # noqa: E402
from torch_ref import check_forward, check_grads, numpy64, tensors  # noqa: E402

CASES = {  # (B, Sq, Sk, Hq, Hkv, D, Dv, flash_attn_func keyword arguments)
    "causal_sq_gt_sk": (2, 40, 17, 2, 2, 16, 16, dict(causal=True)),
    "gqa_sq_lt_sk": (2, 17, 33, 6, 2, 16, 16, dict(causal=True)),
    "window_softcap": (1, 33, 33, 2, 1, 16, 16, dict(window_size=(6, 2), softcap=4.0)),
    "alibi_scale_dv": (2, 20, 24, 4, 4, 32, 8, dict(alibi=True, softmax_scale=0.3)),
}


def _case(case, rng):
    B, Sq, Sk, Hq, Hkv, D, Dv, kw = CASES[case]
    q, k, v = tensors(rng, (B, Sq, Hq, D), (B, Sk, Hkv, D), (B, Sk, Hkv, Dv))
    kw = dict(kw)
    if kw.pop("alibi", False):
        kw["alibi_slopes"] = torch.from_numpy(rng.uniform(0.1, 1.0, Hq).astype(np.float32))
    oracle = dict(causal=kw.get("causal", False), window=kw.get("window_size", (-1, -1)),
                  softcap=kw.get("softcap", 0.0), softmax_scale=kw.get("softmax_scale"),
                  alibi_slopes=None if "alibi_slopes" not in kw else kw["alibi_slopes"].numpy())
    return q, k, v, kw, oracle


def _op_path(q, k, v, kw):
    """The registered custom op, called directly (what torch.compile traces)."""
    scale = kw.get("softmax_scale") or q.shape[-1] ** -0.5
    left, right = kw.get("window_size", (-1, -1))
    return ops.fwd(q, k, v, scale, kw.get("causal", False), left, right, kw.get("softcap", 0.0),
                   kw.get("alibi_slopes"), 0.0, None, False)


@pytest.mark.parametrize("path", ["eager", "op"])
@pytest.mark.parametrize("case", CASES)
def test_autograd_matches_oracle(case, path, rng):
    q, k, v, kw, oracle = _case(case, rng)
    if path == "eager":
        out, lse, none = ft.flash_attn_func(q, k, v, return_attn_probs=True, **kw)
        assert none is None
    else:
        out, lse = _op_path(q, k, v, kw)
    assert out.requires_grad and not lse.requires_grad
    check_forward(out, lse, q, k, v, **oracle)
    check_grads(out, q, k, v, torch.randn_like(out), **oracle)


def test_matches_math_sdpa_in_float64(rng):
    q, k, v = tensors(rng, (2, 3, 37, 32), (2, 3, 37, 32), (2, 3, 37, 32))  # [B, H, N, D]
    out = ft.scaled_dot_product_attention(q, k, v, is_causal=True)
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        ref = F.scaled_dot_product_attention(*(x.double() for x in (q, k, v)), is_causal=True)
    dout = torch.randn_like(out)
    got = torch.autograd.grad(out, (q, k, v), dout)
    want = torch.autograd.grad(ref, (q, k, v), dout.double())
    assert (out.double() - ref).abs().max() <= 1e-5
    for g, w in zip(got, want):
        assert (g.double() - w.double()).abs().max() <= 1e-4 * max(1.0, w.abs().max().item())


def test_dropout_gradients_match_oracle(rng):
    q, k, v = tensors(rng, (2, 19, 2, 16), (2, 23, 1, 16), (2, 23, 1, 16))
    rng_state = torch.tensor([1234, 7], dtype=torch.int64)
    out, lse = ops.fwd(q, k, v, 0.25, True, -1, -1, 0.0, None, 0.3, rng_state, False)
    kw = dict(causal=True, softmax_scale=0.25, dropout_p=0.3, seed=1234, offset=7)
    check_forward(out, lse, q, k, v, **kw)
    check_grads(out, q, k, v, torch.randn_like(out), **kw)


def test_dropout_follows_torch_manual_seed(rng):
    q, k, v = tensors(rng, (1, 17, 2, 16), (1, 17, 2, 16), (1, 17, 2, 16))
    torch.manual_seed(3)
    a = ft.flash_attn_func(q, k, v, dropout_p=0.5)
    torch.manual_seed(3)
    b = ft.flash_attn_func(q, k, v, dropout_p=0.5)
    c = ft.flash_attn_func(q, k, v, dropout_p=0.5)
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_varlen_autograd(rng):
    lens = [(5, 9), (0, 3), (17, 11)]
    cq, ck, mq, mk = packed_lengths(lens)
    q, k, v = tensors(rng, (int(cq[-1]), 4, 16), (int(ck[-1]), 2, 16), (int(ck[-1]), 2, 16))
    cu_q, cu_k = torch.from_numpy(cq), torch.from_numpy(ck)
    out, lse, _ = ft.flash_attn_varlen_func(q, k, v, cu_q, cu_k, mq, mk, causal=True, return_attn_probs=True)
    assert lse.shape == (4, int(cq[-1]))
    kw = dict(causal=True, cu_seqlens_q=cq, cu_seqlens_k=ck)
    check_forward(out, lse, q, k, v, **kw)
    check_grads(out, q, k, v, torch.randn_like(out), **kw)


def test_gradient_of_a_reduction(rng):
    """sum() hands backward an expanded (stride 0) gradient: it must still work."""
    q, k, v = tensors(rng, (1, 9, 2, 16), (1, 9, 2, 16), (1, 9, 2, 16))
    ft.flash_attn_func(q, k, v, causal=True).sum().backward()
    dout = torch.ones(1, 9, 2, 16)
    from fa_check import check_fp32_grads
    check_fp32_grads([x.grad.numpy() for x in (q, k, v)], *numpy64(dout, q, k, v), causal=True)


def test_deterministic_backward_is_bitwise_repeatable(rng):
    q, k, v = tensors(rng, (2, 33, 4, 16), (2, 33, 1, 16), (2, 33, 1, 16))
    dout = torch.randn(2, 33, 4, 16)
    runs = [torch.autograd.grad(ft.flash_attn_func(q, k, v, causal=True, deterministic=True), (q, k, v), dout)
            for _ in range(2)]
    assert all(torch.equal(a, b) for a, b in zip(*runs))


def test_no_grad_needed(rng):
    q, k, v = tensors(rng, (1, 9, 2, 16), (1, 9, 2, 16), (1, 9, 2, 16), requires_grad=False)
    out = ft.flash_attn_func(q, k, v)
    assert not out.requires_grad
    check_forward(out, None, q, k, v)


@pytest.mark.parametrize("op", ["fwd", "fwd_varlen", "bwd", "bwd_varlen"])
def test_opcheck(op, rng):
    """torch.library.opcheck: schema, fake implementation, autograd registration."""
    q, k, v = tensors(rng, (2, 9, 2, 16), (2, 11, 1, 16), (2, 11, 1, 16), requires_grad=op.startswith("fwd"))
    opts = (0.25, True, -1, -1, 0.0, None, 0.0, None, False)
    if op.endswith("varlen"):
        q, k, v = (x.detach().reshape(-1, *x.shape[2:]).requires_grad_(x.requires_grad) for x in (q, k, v))
        var = (torch.tensor([0, 9, 18], dtype=torch.int32), torch.tensor([0, 11, 22], dtype=torch.int32), 9, 11)
    else:
        var = ()
    if op.startswith("fwd"):
        args = (q, k, v, *var, *opts)
    else:
        fwd = ops.fwd_varlen if var else ops.fwd
        out, lse = fwd(q, k, v, *var, *opts)
        args = (torch.randn_like(out), q, k, v, out, lse, *var, *opts)
    torch.library.opcheck(getattr(torch.ops.flashattn, op).default, args)
