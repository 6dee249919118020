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


@pytest.mark.parametrize("bad", ["block_table", "cache_leftpad", "overflow", "negative", "k_alone",
                                 "k_shape", "no_seqlens"])
def test_refusals_write_nothing(rng, bad):
    q, kc, vc, k, v = _setup(rng)
    kc0, vc0 = kc.clone(), vc.clone()
    lens = torch.tensor([1, 2, 3], dtype=torch.int32)
    kw = dict(k=k, v=v, cache_seqlens=lens)
    exc, name = ValueError, "cache_seqlens"
    if bad == "block_table":
        kw["block_table"], exc, name = torch.zeros(3, 1, dtype=torch.int32), NotImplementedError, "block_table"
    elif bad == "cache_leftpad":
        kw["cache_leftpad"], exc, name = lens, NotImplementedError, "cache_leftpad"
    elif bad == "overflow":
        kw["cache_seqlens"] = torch.tensor([1, 39, 3], dtype=torch.int32)
    elif bad == "negative":
        kw["cache_seqlens"] = torch.tensor([1, -1, 3], dtype=torch.int32)
    elif bad == "k_alone":
        kw["v"], name = None, "v"
    elif bad == "k_shape":
        kw["k"], name = k[:, :, :1], "k"
    elif bad == "no_seqlens":
        kw["cache_seqlens"] = None
    with pytest.raises(exc) as e:
        flash_attn_with_kvcache(q, kc, vc, **kw)
    assert e.value.argument == name
    assert torch.equal(kc, kc0) and torch.equal(vc, vc0)


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
