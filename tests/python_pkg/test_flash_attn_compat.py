"""flashattn.torch against flash_attn 2.x's interface: names, argument names, defaults and
return values (the signatures below are flash_attn's, written out by hand), and the SDPA
drop-in against torch.nn.functional.scaled_dot_product_attention."""

import inspect

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import flashattn.torch as ft  # noqa: E402

_TAIL = ("dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, "
         "alibi_slopes=None, deterministic=False, return_attn_probs=False")
FLASH_ATTN_2 = {
    "flash_attn_func": f"(q, k, v, {_TAIL})",
    "flash_attn_qkvpacked_func": f"(qkv, {_TAIL})",
    "flash_attn_kvpacked_func": f"(q, kv, {_TAIL})",
    "flash_attn_varlen_func": f"(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, {_TAIL}, "
                              "block_table=None)",
    "flash_attn_varlen_qkvpacked_func": f"(qkv, cu_seqlens, max_seqlen, {_TAIL})",
    "flash_attn_varlen_kvpacked_func": f"(q, kv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, {_TAIL})",
    "flash_attn_with_kvcache": "(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None, "
                               "cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, block_table=None, "
                               "softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, "
                               "rotary_interleaved=True, alibi_slopes=None, num_splits=0, "
                               "return_softmax_lse=False)",
}
SDPA = "(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False)"


@pytest.mark.parametrize("name", FLASH_ATTN_2)
def test_flash_attn_signatures(name):
    assert str(inspect.signature(getattr(ft, name))) == FLASH_ATTN_2[name]


def test_sdpa_signature():
    assert str(inspect.signature(ft.scaled_dot_product_attention)) == SDPA


def _rand(*shape):
    return torch.randn(*shape)


def test_packed_forms_equal_the_unpacked_one():
    torch.manual_seed(0)
    qkv, kv = _rand(2, 17, 3, 4, 16), _rand(2, 23, 2, 2, 16)
    q = qkv[:, :, 0]
    ref = ft.flash_attn_func(*qkv.unbind(2), causal=True)
    torch.testing.assert_close(ft.flash_attn_qkvpacked_func(qkv, causal=True), ref, rtol=0, atol=0)
    torch.testing.assert_close(ft.flash_attn_kvpacked_func(q, kv, causal=True),
                               ft.flash_attn_func(q, *kv.unbind(2), causal=True), rtol=0, atol=0)

    cu = torch.tensor([0, 17, 34], dtype=torch.int32)
    flat = qkv.reshape(34, 3, 4, 16)
    packed = ft.flash_attn_varlen_qkvpacked_func(flat, cu, 17, causal=True)
    torch.testing.assert_close(packed.view(2, 17, 4, 16), ref, rtol=0, atol=1e-6)
    cuk = torch.tensor([0, 23, 46], dtype=torch.int32)
    out = ft.flash_attn_varlen_kvpacked_func(q.reshape(34, 4, 16), kv.reshape(46, 2, 2, 16), cu, cuk, 17, 23)
    torch.testing.assert_close(out.view(2, 17, 4, 16), ft.flash_attn_kvpacked_func(q, kv), rtol=0, atol=1e-6)


def test_return_attn_probs_gives_out_lse_none():
    q = _rand(2, 9, 4, 16)
    out, lse, probs = ft.flash_attn_func(q, q, q, return_attn_probs=True)
    assert probs is None and lse.shape == (2, 4, 9) and lse.dtype == torch.float32
    torch.testing.assert_close(out, ft.flash_attn_func(q, q, q), rtol=0, atol=0)


def test_refusals_name_the_argument():
    q = _rand(1, 9, 2, 16)
    cu = torch.tensor([0, 9], dtype=torch.int32)
    with pytest.raises(NotImplementedError) as info:
        ft.flash_attn_varlen_func(q[0], q[0], q[0], cu, cu, 9, 9, block_table=cu)
    assert info.value.argument == "block_table"
    with pytest.raises(NotImplementedError) as info:
        ft.scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(9, 9, dtype=torch.bool))
    assert info.value.argument == "attn_mask"
    with pytest.raises(ValueError) as info:
        ft.scaled_dot_product_attention(_rand(1, 4, 9, 16), _rand(1, 2, 9, 16), _rand(1, 2, 9, 16))
    assert info.value.argument == "key"
    with pytest.raises(ValueError) as info:
        ft.flash_attn_func(q, q, q, window_size=3)
    assert info.value.argument == "window_size"
    with pytest.raises(TypeError) as info:
        ft.flash_attn_func(q.double(), q.double(), q.double())
    assert info.value.argument == "q"
    with pytest.raises(ValueError) as info:  # head dim 0: was a ZeroDivisionError in the scale
        ft.flash_attn_func(q[..., :0], q[..., :0], q[..., :0])
    assert info.value.argument == "q"


@pytest.mark.parametrize("nq,nk", [(33, 33), (17, 40), (40, 17)])
@pytest.mark.parametrize("is_causal", [False, True])
def test_sdpa_drop_in_matches_torch(nq, nk, is_causal):
    """Same results as PyTorch's SDPA (top-left causal alignment included), in float64 math."""
    torch.manual_seed(nq * nk)
    q, k, v = _rand(2, 4, nq, 32), _rand(2, 2, nk, 32), _rand(2, 2, nk, 16)
    for t in (q, k, v):
        t.requires_grad_(True)
    out = ft.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=0.2, enable_gqa=True)
    assert out.shape == (2, 4, nq, 16)
    # The reference repeats the kv heads itself (SDPA's enable_gqa arrived in PyTorch 2.5).
    kr, vr = (t.double().repeat_interleave(q.shape[1] // t.shape[1], dim=1) for t in (k, v))
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        ref = F.scaled_dot_product_attention(q.double(), kr, vr, is_causal=is_causal, scale=0.2)
    assert (out.double() - ref).abs().max() <= 1e-5
    dout = torch.randn_like(out)
    for g, w in zip(torch.autograd.grad(out, (q, k, v), dout), torch.autograd.grad(ref, (q, k, v), dout.double())):
        assert (g.double() - w.double()).abs().max() <= 1e-4 * max(1.0, w.abs().max().item())


def test_sdpa_drop_in_reads_views():
    """[B, H, N, D] -> [B, N, H, D] is a transpose: the output is a view, like PyTorch's flash path."""
    q = _rand(1, 2, 9, 16)
    out = ft.scaled_dot_product_attention(q, q, q)
    assert out.shape == (1, 2, 9, 16) and not out.is_contiguous() and out.transpose(1, 2).is_contiguous()
