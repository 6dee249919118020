"""flashattn.torch.flash_attn_with_kvcache against flash_attn's meaning: the new keys
written into the caches in place, rotary embedding of q and the new k, attention over
the used keys (checked with the float64 oracle), cache_batch_idx, errors before any
write, and torch.compile."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fa_check import check_fp32_forward  # noqa: E402
from flashattn.torch import flash_attn_with_kvcache  # noqa: E402


def _rotary_ref(x, cos, sin, pos, interleaved):
    """Rotation as complex multiplication, per row (an independent formulation)."""
    x = x.double().clone()
    half = cos.shape[1]
    for b in range(x.shape[0]):
        for s in range(x.shape[1]):
            p = int(pos[b, s])
            rot = torch.complex(cos[p].double(), sin[p].double())
            if interleaved:
                z = torch.complex(x[b, s, :, 0:2 * half:2], x[b, s, :, 1:2 * half:2]) * rot
                x[b, s, :, 0:2 * half:2], x[b, s, :, 1:2 * half:2] = z.real, z.imag
            else:
                z = torch.complex(x[b, s, :, :half], x[b, s, :, half:2 * half]) * rot
                x[b, s, :, :half], x[b, s, :, half:2 * half] = z.real, z.imag
    return x.float()


def _setup(rng, B=3, Sq=2, Hq=4, Hkv=2, D=16, Sc=40, Bc=None):
    t = lambda *s: torch.from_numpy(rng.standard_normal(s).astype(np.float32))  # noqa: E731
    return t(B, Sq, Hq, D), t(Bc or B, Sc, Hkv, D), t(Bc or B, Sc, Hkv, D), t(B, Sq, Hkv, D), t(B, Sq, Hkv, D)


@pytest.mark.parametrize("rotary", [None, "interleaved", "halves"])
@pytest.mark.parametrize("causal", [False, True])
def test_append_rotary_and_attend(rng, rotary, causal):
    q, kc, vc, k, v = _setup(rng)
    kc0, vc0 = kc.clone(), vc.clone()
    lens = torch.tensor([0, 17, 38], dtype=torch.int32)
    kw = {}
    if rotary:
        ang = torch.from_numpy(rng.uniform(0, 6.3, (64, 6)).astype(np.float32))
        kw = dict(rotary_cos=ang.cos(), rotary_sin=ang.sin(), rotary_interleaved=rotary == "interleaved")
    out, lse = flash_attn_with_kvcache(q, kc, vc, k, v, cache_seqlens=lens, causal=causal,
                                       return_softmax_lse=True, **kw)
    for b in range(3):
        n = int(lens[b])
        pos = torch.arange(n, n + 2)[None]
        k_new = _rotary_ref(k[b:b + 1], kw["rotary_cos"], kw["rotary_sin"], pos, kw["rotary_interleaved"]) if rotary else k[b:b + 1]
        q_pos = pos if causal else torch.full((1, 2), n)
        q_b = _rotary_ref(q[b:b + 1], kw["rotary_cos"], kw["rotary_sin"], q_pos, kw["rotary_interleaved"]) if rotary else q[b:b + 1]
        # The caches: the new rows written, every other row untouched.
        torch.testing.assert_close(kc[b, n:n + 2], k_new[0], atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(vc[b, n:n + 2], v[b])
        assert torch.equal(kc[b, :n], kc0[b, :n]) and torch.equal(kc[b, n + 2:], kc0[b, n + 2:])
        assert torch.equal(vc[b, :n], vc0[b, :n]) and torch.equal(vc[b, n + 2:], vc0[b, n + 2:])
        check_fp32_forward(out[b:b + 1].numpy(), lse[b:b + 1].numpy(), q_b.double().numpy(),
                           kc[b:b + 1, :n + 2].double().numpy(), vc[b:b + 1, :n + 2].double().numpy(),
                           causal=causal, ctx=f"sequence {b}")


def test_without_new_keys_and_batch_idx(rng):
    q, kc, vc, _, _ = _setup(rng, Bc=5)
    idx = torch.tensor([4, 0, 2])
    lens = torch.tensor([7, 40, 1], dtype=torch.int32)
    out = flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens, cache_batch_idx=idx, window_size=(5, 0),
                                  softcap=4.0)
    for b in range(3):
        c, n = int(idx[b]), int(lens[b])
        check_fp32_forward(out[b:b + 1].numpy(), None, q[b:b + 1].numpy(), kc[c:c + 1, :n].numpy(),
                           vc[c:c + 1, :n].numpy(), window=(5, 0), softcap=4.0)
    # An int cache_seqlens, and None: the whole cache.
    full = flash_attn_with_kvcache(q, kc[:3], vc[:3])
    same = flash_attn_with_kvcache(q, kc[:3], vc[:3], cache_seqlens=40)
    assert torch.equal(full, same)


def test_appends_through_batch_idx(rng):
    q, kc, vc, k, v = _setup(rng, Bc=4)
    idx = torch.tensor([3, 1, 0])
    kc0 = kc.clone()
    flash_attn_with_kvcache(q, kc, vc, k, v, cache_seqlens=torch.tensor([5, 6, 7], dtype=torch.int32),
                            cache_batch_idx=idx)
    for b, n in zip(range(3), (5, 6, 7)):
        assert torch.equal(kc[int(idx[b]), n:n + 2], k[b])
    assert torch.equal(kc[2], kc0[2])  # a cache no sequence picked


def test_new_rows_that_are_views_of_the_cache():
    """k / v views of the cache rows just before where they go: each row gets what its
    source held before the call."""
    kc = torch.arange(16, dtype=torch.float32)[None, :, None, None].expand(1, 16, 1, 4).contiguous()
    vc = kc.clone()
    flash_attn_with_kvcache(torch.zeros(1, 1, 1, 4), kc, vc, kc[:, 0:2], vc[:, 0:2],
                            cache_seqlens=torch.tensor([1], dtype=torch.int32))
    assert kc[0, :4, 0, 0].tolist() == [0, 0, 1, 3] and vc[0, :4, 0, 0].tolist() == [0, 0, 1, 3]


def test_appends_are_seen_by_autograd():
    """A cache saved for a backward and then appended to: the backward refuses, as after
    any in-place write; a leaf cache that requires grad is refused before the write."""
    kc, vc = torch.zeros(1, 64, 1, 4), torch.zeros(1, 64, 1, 4)
    w = torch.ones(4, requires_grad=True)
    y = (kc * w * w).sum()
    ones = torch.ones(1, 1, 1, 4)
    flash_attn_with_kvcache(torch.randn(1, 1, 1, 4), kc, vc, ones, ones,
                            cache_seqlens=torch.tensor([0], dtype=torch.int32))
    with pytest.raises(RuntimeError, match="inplace"):
        y.backward()
    leaf = torch.zeros(1, 64, 1, 4, requires_grad=True)
    with pytest.raises(RuntimeError):
        flash_attn_with_kvcache(torch.randn(1, 1, 1, 4), leaf, vc, ones, ones,
                                cache_seqlens=torch.tensor([0], dtype=torch.int32))
    assert not leaf.detach().any()


@pytest.mark.parametrize("batch_idx", [False, True])
def test_alibi_with_appends(rng, batch_idx):
    """ALiBi slopes reach the library on both routes: the library's append (one call) and
    cache_batch_idx's (a check, then the call)."""
    q, kc, vc, k, v = _setup(rng, Bc=3)
    slopes = torch.tensor([0.5, 0.25, 0.125, 0.0625])
    lens = torch.tensor([3, 20, 30], dtype=torch.int32)
    idx = torch.tensor([2, 0, 1]) if batch_idx else None
    out = flash_attn_with_kvcache(q, kc, vc, k, v, cache_seqlens=lens, cache_batch_idx=idx, causal=True,
                                  alibi_slopes=slopes)
    for b in range(3):
        c, n = (int(idx[b]) if batch_idx else b), int(lens[b]) + 2
        assert torch.equal(kc[c, n - 2:n], k[b]) and torch.equal(vc[c, n - 2:n], v[b])
        check_fp32_forward(out[b:b + 1].numpy(), None, q[b:b + 1].numpy(), kc[c:c + 1, :n].numpy(),
                           vc[c:c + 1, :n].numpy(), causal=True, alibi_slopes=slopes.numpy(), ctx=f"sequence {b}")


def test_bf16_decode_steps_match_one_prefill(rng):
    """Appending one token at a time gives what attending to the whole sequence gives."""
    q, kc, vc, _, _ = _setup(rng, B=2, Sq=6, Sc=16)
    q, kc, vc = q.bfloat16(), kc.bfloat16(), vc.bfloat16()
    k_all, v_all = kc[:, :6].clone(), vc[:, :6].clone()
    cache_k, cache_v = torch.zeros_like(kc), torch.zeros_like(vc)
    steps = [flash_attn_with_kvcache(q[:, t:t + 1], cache_k, cache_v, k_all[:, t:t + 1], v_all[:, t:t + 1],
                                     cache_seqlens=t, causal=True) for t in range(6)]
    from flashattn.torch import flash_attn_func
    whole = flash_attn_func(q, k_all, v_all, causal=True)
    torch.testing.assert_close(torch.cat(steps, 1).float(), whole.float(), atol=2e-2, rtol=2e-2)


REFUSALS = {  # name: (change to the valid call, exception, argument named)
    "page_of_40": (lambda kw: kw.update(block_table=torch.zeros(3, 1, dtype=torch.int32)), ValueError, "k_cache"),
    "block_table_int64": (lambda kw: kw.update(block_table=torch.zeros(3, 1, dtype=torch.int64)), TypeError, "block_table"),
    "cache_leftpad": (lambda kw: kw.update(cache_leftpad=kw["cache_seqlens"]), NotImplementedError, "cache_leftpad"),
    "overflow": (lambda kw: kw.update(cache_seqlens=torch.tensor([1, 39, 3], dtype=torch.int32)), ValueError, "cache_seqlens"),
    "negative": (lambda kw: kw.update(cache_seqlens=torch.tensor([1, -1, 3], dtype=torch.int32)), ValueError, "cache_seqlens"),
    "seqlens_int64": (lambda kw: kw.update(cache_seqlens=kw["cache_seqlens"].long()), TypeError, "cache_seqlens"),
    "k_alone": (lambda kw: kw.update(v=None), ValueError, "v"),
    "k_shape": (lambda kw: kw.update(k=kw["k"][:, :, :1]), ValueError, "k"),
    "v_dtype": (lambda kw: kw.update(v=kw["v"].double()), TypeError, "v"),
    "v_device": (lambda kw: kw.update(v=kw["v"].to("meta")), ValueError, "v"),
    "no_seqlens": (lambda kw: kw.update(cache_seqlens=None), ValueError, "cache_seqlens"),
    # Refused by the library, still before any write.
    "q_dtype": (lambda kw: kw.update(q=kw["q"].bfloat16()), TypeError, "k_cache"),
    "q_head_dim": (lambda kw: kw.update(q=kw["q"][..., :8]), ValueError, "k_cache"),
    "heads_not_multiple": (lambda kw: kw.update(q=kw["q"][:, :, :3]), ValueError, "k_cache"),
    "softcap": (lambda kw: kw.update(softcap=-1.0), ValueError, "softcap"),
    "scale_nan": (lambda kw: kw.update(softmax_scale=float("nan")), ValueError, "softmax_scale"),
    "window": (lambda kw: kw.update(window_size=(-5, 0)), ValueError, "window"),
    "alibi_shape": (lambda kw: kw.update(alibi_slopes=torch.ones(3)), ValueError, "alibi_slopes"),
    "v_cache_short": (lambda kw: kw.update(v_cache=kw["v_cache"][:, :30]), ValueError, "v_cache"),
    "too_few_caches": (lambda kw: kw.update(k_cache=kw["k_cache"][:2], v_cache=kw["v_cache"][:2]), ValueError, "k_cache"),
    "batch_idx_range": (lambda kw: kw.update(cache_batch_idx=torch.tensor([0, 1, 3])), ValueError, "cache_batch_idx"),
    "rotary_without_k": (lambda kw: kw.update(k=None, v=None, rotary_cos=torch.ones(40, 4), rotary_sin=torch.ones(40, 4)),
                         ValueError, "rotary_cos"),
    "rotary_short_table": (lambda kw: kw.update(rotary_cos=torch.ones(39, 4), rotary_sin=torch.ones(39, 4)),
                           ValueError, "rotary_cos"),
    "rotary_too_wide": (lambda kw: kw.update(rotary_cos=torch.ones(40, 9), rotary_sin=torch.ones(40, 9)),
                        ValueError, "rotary_cos"),
}


@pytest.mark.parametrize("bad", REFUSALS)
def test_refusals_write_nothing(rng, bad):
    q, kc, vc, k, v = _setup(rng)
    kc0, vc0 = kc.clone(), vc.clone()
    kw = dict(q=q, k_cache=kc, v_cache=vc, k=k, v=v, cache_seqlens=torch.tensor([1, 2, 3], dtype=torch.int32))
    change, exc, name = REFUSALS[bad]
    change(kw)
    with pytest.raises(exc) as e:
        flash_attn_with_kvcache(**kw)
    assert e.value.argument == name, str(e.value)
    assert torch.equal(kc, kc0) and torch.equal(vc, vc0)


def test_more_caches_than_sequences_uses_the_first(rng):
    q, kc, vc, k, v = _setup(rng, Bc=5)
    lens = torch.tensor([4, 0, 9], dtype=torch.int32)
    out = flash_attn_with_kvcache(q, kc, vc, k, v, cache_seqlens=lens)
    kc3, vc3 = kc[:3].clone(), vc[:3].clone()
    again = flash_attn_with_kvcache(q, kc3, vc3, k, v, cache_seqlens=lens)  # same rows written again
    assert torch.equal(out, again)


def test_long_window_counts_as_none_for_rotary(rng):
    """flash_attn: a window side as long as the cache is no window, so q (two rows here)
    rotates at cache_seqlens, not at cache_seqlens + i."""
    q, kc, vc, k, v = _setup(rng)
    ang = torch.from_numpy(rng.uniform(0, 6.3, (40, 8)).astype(np.float32))
    kw = dict(cache_seqlens=torch.tensor([1, 2, 3], dtype=torch.int32), rotary_cos=ang.cos(), rotary_sin=ang.sin())
    a = flash_attn_with_kvcache(q, kc.clone(), vc.clone(), k, v, window_size=(40, -1), **kw)
    b = flash_attn_with_kvcache(q, kc.clone(), vc.clone(), k, v, **kw)
    assert torch.equal(a, b)


def test_no_autograd_through_the_cache(rng):
    q, kc, vc, k, v = _setup(rng)
    for t in (q, k, v):
        t.requires_grad_(True)
    out = flash_attn_with_kvcache(q, kc, vc, k, v, cache_seqlens=torch.tensor([1, 2, 3], dtype=torch.int32))
    assert not out.requires_grad and not kc.requires_grad and kc.grad_fn is None
    step = torch.compile(lambda *a: flash_attn_with_kvcache(*a, cache_seqlens=torch.tensor([4, 5, 6], dtype=torch.int32)),
                         backend="aot_eager")
    out = step(q, kc, vc, k, v)
    assert not out.requires_grad and not kc.requires_grad


def test_compiled_refusal_writes_nothing(rng):
    q, kc, vc, k, v = _setup(rng)
    kc0 = kc.clone()
    step = torch.compile(lambda *a: flash_attn_with_kvcache(*a[:5], cache_seqlens=a[5]), backend="aot_eager",
                         fullgraph=True)
    with pytest.raises(ValueError) as e:
        step(q, kc, vc, k, v, torch.tensor([-1, 3, 0], dtype=torch.int32))
    assert e.value.argument == "cache_seqlens"
    assert torch.equal(kc, kc0)


def test_compiles_in_one_graph(rng):
    q, kc, vc, k, v = _setup(rng)
    lens = torch.tensor([3, 9, 20], dtype=torch.int32)
    kc2, vc2 = kc.clone(), vc.clone()
    eager = flash_attn_with_kvcache(q, kc, vc, k, v, cache_seqlens=lens, causal=True)
    step = torch.compile(lambda *a: flash_attn_with_kvcache(*a[:5], cache_seqlens=a[5], causal=True),
                         backend="aot_eager", fullgraph=True)
    compiled = step(q, kc2, vc2, k, v, lens)
    assert torch.equal(eager, compiled)
    assert torch.equal(kc, kc2) and torch.equal(vc, vc2)


def _paged(kc, vc, page, rng):
    """The caches [B, S, Hkv, D] as shuffled blocks of a pool with two spare blocks (NaN)."""
    B, S = kc.shape[:2]
    n = B * (S // page)
    order = torch.from_numpy(rng.permutation(n + 2)[:n].astype(np.int64))
    pools = []
    for c in (kc, vc):
        pool = torch.full((n + 2, page) + tuple(c.shape[2:]), float("nan"), dtype=c.dtype)
        pool[order] = c.reshape(n, page, *c.shape[2:])
        pools.append(pool)
    return pools[0], pools[1], order.view(B, S // page).to(torch.int32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_paged_cache_gives_what_the_plain_one_gives(rng, dtype):
    q, kc, vc, k, v = _setup(rng, Sc=256)
    q, kc, vc, k, v = (t.to(dtype) for t in (q, kc, vc, k, v))
    lens = torch.tensor([0, 100, 190], dtype=torch.int32)
    kp, vp, table = _paged(kc, vc, 64, rng)
    ang = torch.from_numpy(rng.uniform(0, 6.3, (256, 8)).astype(np.float32))
    kw = dict(cache_seqlens=lens, causal=True, rotary_cos=ang.cos(), rotary_sin=ang.sin(), return_softmax_lse=True)
    out, lse = flash_attn_with_kvcache(q, kc, vc, k, v, **kw)
    out_p, lse_p = flash_attn_with_kvcache(q, kp, vp, k, v, block_table=table, **kw)
    torch.testing.assert_close(out_p, out, atol=1e-5 if dtype == torch.float32 else 2e-2, rtol=1e-5)
    torch.testing.assert_close(lse_p, lse, atol=1e-5, rtol=1e-5)
    # The new keys went to the blocks the table names.
    for b in range(3):
        for t in range(2):
            j = int(lens[b]) + t
            assert torch.equal(kp[int(table[b, j // 64]), j % 64], kc[b, j])
            assert torch.equal(vp[int(table[b, j // 64]), j % 64], vc[b, j])


def test_paged_refusal_writes_nothing(rng):
    q, kc, vc, k, v = _setup(rng, Sc=128)
    kp, vp, table = _paged(kc, vc, 64, rng)
    table[2, 1] = 99  # sequence 2's new keys would go to a block the pool lacks
    kp0, vp0 = kp.clone(), vp.clone()
    with pytest.raises(ValueError) as e:
        flash_attn_with_kvcache(q, kp, vp, k, v, cache_seqlens=torch.tensor([1, 2, 70], dtype=torch.int32),
                                block_table=table)
    assert e.value.argument == "block_table"
    assert torch.equal(kp.nan_to_num(7.0), kp0.nan_to_num(7.0))
    assert torch.equal(vp.nan_to_num(7.0), vp0.nan_to_num(7.0))
