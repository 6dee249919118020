"""Self-tests of the float64 oracle (fa_oracle.py): it must be right before it judges anything."""

import math
import os
import sys
import zlib

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fa_oracle as fo  # noqa: E402


# --------------------------------------------------------------------------------------------
# A second, scalar Philox written with plain Python ints (cross-checks the vectorised one)
# --------------------------------------------------------------------------------------------

def philox_scalar(ctr, k0, k1):
    c = [x & 0xFFFFFFFF for x in ctr]
    k0 &= 0xFFFFFFFF
    k1 &= 0xFFFFFFFF
    for _ in range(10):
        p0 = 0xD2511F53 * c[0]
        p1 = 0xCD9E8D57 * c[2]
        hi0, lo0 = p0 >> 32, p0 & 0xFFFFFFFF
        hi1, lo1 = p1 >> 32, p1 & 0xFFFFFFFF
        c = [hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0]
        k0 = (k0 + 0x9E3779B9) & 0xFFFFFFFF
        k1 = (k1 + 0xBB67AE85) & 0xFFFFFFFF
    return c


def keep_scalar(seed, offset, b, h, i, j, p):
    key = philox_scalar([offset & 0xFFFFFFFF, offset >> 32, 0x46414452, 0], seed & 0xFFFFFFFF, seed >> 32)
    w = philox_scalar([j >> 2, i, h, b], key[0], key[1])[j & 3]
    thr = min(math.floor(float(np.float32(p)) * 2.0 ** 32), 2 ** 32 - 1)
    return w >= thr


def test_philox_known_answers():
    r = [int(x) for x in fo.philox4x32_10([0, 0, 0, 0], 0, 0)]
    assert r == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    # Random123 known-answer vectors for philox4x32_10.
    r = [int(x) for x in fo.philox4x32_10([0xFFFFFFFF] * 4, 0xFFFFFFFF, 0xFFFFFFFF)]
    assert r == [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]
    r = [int(x) for x in fo.philox4x32_10([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], 0xA4093822, 0x299F31D0)]
    assert r == [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]


def test_philox_vectorised_matches_scalar():
    rng = np.random.default_rng(1)
    ctr = rng.integers(0, 2 ** 32, size=(4, 50), dtype=np.uint64)
    k0, k1 = 0x12345678, 0x9ABCDEF0
    vec = fo.philox4x32_10([ctr[0], ctr[1], ctr[2], ctr[3]], k0, k1)
    for n in range(50):
        ref = philox_scalar([int(ctr[w, n]) for w in range(4)], k0, k1)
        assert [int(vec[w][n]) for w in range(4)] == ref


@pytest.mark.parametrize("seed,offset,b,h,p", [
    (0, 0, 0, 0, 0.1),
    (42, 7, 1, 3, 0.5),
    (2 ** 64 - 1, 2 ** 40 + 3, 5, 2, 0.25),
    (123456789012345, 0xFFFFFFFF, 0, 1, 0.9),
])
def test_dropout_mask_matches_scalar(seed, offset, b, h, p):
    Sq, Sk = 6, 11
    m = fo.dropout_keep_mask(seed, offset, b, h, Sq, Sk, p)
    assert m.shape == (Sq, Sk) and m.dtype == bool
    for i in range(Sq):
        for j in range(Sk):
            assert m[i, j] == keep_scalar(seed, offset, b, h, i, j, p)


def test_dropout_mask_statistics_and_dependence():
    p = 0.3
    m = fo.dropout_keep_mask(5, 9, 0, 0, 200, 200, p)
    assert abs(m.mean() - (1 - p)) < 0.01
    # Depends on every coordinate of the call.
    for args in [(6, 9, 0, 0), (5, 10, 0, 0), (5, 9, 1, 0), (5, 9, 0, 1)]:
        assert (fo.dropout_keep_mask(*args, 200, 200, p) != m).mean() > 0.2
    # Rows/columns are a pure function of (i, j): a sub-block is the same entries.
    sub = fo.dropout_keep_mask(5, 9, 0, 0, 30, 45, p)
    assert np.array_equal(sub, m[:30, :45])
    assert fo.dropout_keep_mask(5, 9, 0, 0, 10, 10, 0.0).all()
    assert fo.dropout_threshold(0.0) == 0
    assert fo.dropout_threshold(0.5) == 2 ** 31
    assert fo.dropout_scale(0.5) == 2.0


# --------------------------------------------------------------------------------------------
# Brute-force forward: scalar loops with math, written separately from the oracle
# --------------------------------------------------------------------------------------------

def brute_forward(q, k, v, scale=None, causal=False, window=(-1, -1), softcap=0.0, alibi=None,
                  dropout_p=0.0, seed=0, offset=0):
    """Batched only. Plain loops, nothing vectorised."""
    B, Sq, Hq, D = q.shape
    _, Sk, Hkv, Dv = v.shape
    g = Hq // Hkv
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    out = np.zeros((B, Sq, Hq, Dv))
    lse = np.full((B, Hq, Sq), -np.inf)
    left, right = window
    for b in range(B):
        for h in range(Hq):
            kvh = h // g
            slope = None
            if alibi is not None:
                slope = alibi[h] if alibi.ndim == 1 else alibi[b, h]
            for i in range(Sq):
                pos = i + Sk - Sq
                logits = {}
                for j in range(Sk):
                    if causal and j > pos:
                        continue
                    if left >= 0 and j < pos - left:
                        continue
                    if right >= 0 and j > pos + right:
                        continue
                    s = scale * sum(float(q[b, i, h, d]) * float(k[b, j, kvh, d]) for d in range(D))
                    if softcap > 0:
                        s = softcap * math.tanh(s / softcap)
                    if slope is not None:
                        s += -float(slope) * abs(pos - j)
                    logits[j] = s
                if not logits:
                    continue
                m = max(logits.values())
                tot = sum(math.exp(s - m) for s in logits.values())
                lse[b, h, i] = m + math.log(tot)
                for j, s in logits.items():
                    pij = math.exp(s - m) / tot
                    if dropout_p > 0:
                        if not keep_scalar(seed, offset, b, h, i, j, dropout_p):
                            continue
                        pij *= float(np.float32(1) / (np.float32(1) - np.float32(dropout_p)))
                    for d in range(Dv):
                        out[b, i, h, d] += pij * float(v[b, j, kvh, d])
    return out, lse


def rand(rng, *shape):
    return rng.standard_normal(shape)


FWD_CASES = [
    dict(),
    dict(causal=True),
    dict(window=(2, 1)),
    dict(window=(-1, 1)),
    dict(window=(0, -1)),
    dict(causal=True, window=(3, 2)),
    dict(softcap=1.5),
    dict(alibi="h"),
    dict(alibi="bh"),
    dict(dropout_p=0.3, seed=11, offset=4),
    dict(softmax_scale=0.7, softcap=2.0, alibi="h", causal=True, dropout_p=0.2, seed=3, offset=1),
]


def _materialise(opts, rng, B, Hq):
    o = dict(opts)
    if o.get("alibi") == "h":
        o["alibi_slopes"] = rng.uniform(0.1, 1.0, Hq)
    elif o.get("alibi") == "bh":
        o["alibi_slopes"] = rng.uniform(0.1, 1.0, (B, Hq))
    o.pop("alibi", None)
    return o


def _brute_kwargs(o):
    return dict(scale=o.get("softmax_scale"), causal=o.get("causal", False), window=o.get("window", (-1, -1)),
                softcap=o.get("softcap", 0.0), alibi=o.get("alibi_slopes"), dropout_p=o.get("dropout_p", 0.0),
                seed=o.get("seed", 0), offset=o.get("offset", 0))


@pytest.mark.parametrize("opts", FWD_CASES, ids=lambda o: ",".join(sorted(o)) or "plain")
@pytest.mark.parametrize("Sq,Sk", [(5, 5), (3, 7), (7, 3), (1, 4)])
def test_forward_matches_brute_force(opts, Sq, Sk):
    rng = np.random.default_rng(zlib.crc32(repr((opts, Sq, Sk)).encode()))
    B, Hq, Hkv, D, Dv = 2, 4, 2, 3, 5
    q, k, v = rand(rng, B, Sq, Hq, D), rand(rng, B, Sk, Hkv, D), rand(rng, B, Sk, Hkv, Dv)
    o = _materialise(opts, rng, B, Hq)
    out, lse = fo.attention_forward(q, k, v, **o)
    ref_out, ref_lse = brute_forward(q, k, v, **_brute_kwargs(o))
    assert out.shape == (B, Sq, Hq, Dv) and lse.shape == (B, Hq, Sq)
    np.testing.assert_allclose(out, ref_out, rtol=1e-12, atol=1e-12)
    assert np.array_equal(np.isinf(lse), np.isinf(ref_lse))
    np.testing.assert_allclose(lse, ref_lse, rtol=1e-12, atol=1e-12)
    assert not np.isnan(out).any() and not np.isnan(lse).any()


def test_causal_equals_window_minus1_0():
    rng = np.random.default_rng(2)
    for Sq, Sk in [(6, 6), (4, 9), (9, 4)]:
        q, k, v = rand(rng, 2, Sq, 2, 4), rand(rng, 2, Sk, 2, 4), rand(rng, 2, Sk, 2, 4)
        a = fo.attention_forward(q, k, v, causal=True)
        b = fo.attention_forward(q, k, v, window=(-1, 0))
        c = fo.attention_forward(q, k, v, causal=True, window=(-1, 0))
        for x, y in [(a, b), (a, c)]:
            assert np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1])
        do = rand(rng, 2, Sq, 2, 4)
        ga = fo.attention_backward(do, q, k, v, causal=True)
        gb = fo.attention_backward(do, q, k, v, window=(-1, 0))
        for x, y in zip(ga, gb):
            assert np.array_equal(x, y)


def test_fully_masked_rows():
    rng = np.random.default_rng(3)
    Sq, Sk = 8, 3  # causal with Sq > Sk: rows i < Sq - Sk see nothing
    q, k, v = rand(rng, 1, Sq, 2, 4), rand(rng, 1, Sk, 1, 4), rand(rng, 1, Sk, 1, 4)
    out, lse = fo.attention_forward(q, k, v, causal=True)
    assert not np.isnan(out).any() and not np.isnan(lse).any()
    dead = Sq - Sk
    assert np.all(out[:, :dead] == 0) and np.all(lse[:, :, :dead] == -np.inf)
    assert np.all(np.isfinite(lse[:, :, dead:]))
    do = rand(rng, 1, Sq, 2, 4)
    dq, dk, dv = fo.attention_backward(do, q, k, v, causal=True)
    assert np.all(dq[:, :dead] == 0)
    assert not any(np.isnan(x).any() for x in (dq, dk, dv))
    # A window that excludes everything on one side (window far to the left of the diagonal).
    out, lse = fo.attention_forward(q, k, v, window=(0, 0))
    vis = fo.visible_mask(Sq, Sk, window=(0, 0))
    assert np.all(out[0][~vis.any(1)] == 0)
    # Empty key set.
    out, lse = fo.attention_forward(q, k[:, :0], v[:, :0])
    assert out.shape == (1, Sq, 2, 4) and np.all(out == 0) and np.all(lse == -np.inf)


def test_gqa_equals_repeated_kv():
    rng = np.random.default_rng(4)
    for Hq, Hkv in [(6, 2), (4, 1)]:
        B, Sq, Sk, D = 2, 5, 7, 4
        q, k, v = rand(rng, B, Sq, Hq, D), rand(rng, B, Sk, Hkv, D), rand(rng, B, Sk, Hkv, 3)
        g = Hq // Hkv
        kr, vr = np.repeat(k, g, axis=2), np.repeat(v, g, axis=2)
        opts = dict(causal=True, softcap=3.0, alibi_slopes=rng.uniform(0, 1, Hq), dropout_p=0.25, seed=9)
        a = fo.attention_forward(q, k, v, **opts)
        b = fo.attention_forward(q, kr, vr, **opts)
        np.testing.assert_allclose(a[0], b[0], rtol=1e-14, atol=1e-14)
        np.testing.assert_allclose(a[1], b[1], rtol=1e-14, atol=1e-14)
        do = rand(rng, B, Sq, Hq, 3)
        dq, dk, dv = fo.attention_backward(do, q, k, v, **opts)
        dqr, dkr, dvr = fo.attention_backward(do, q, kr, vr, **opts)
        np.testing.assert_allclose(dq, dqr, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(dk, dkr.reshape(B, Sk, Hkv, g, D).sum(3), rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(dv, dvr.reshape(B, Sk, Hkv, g, 3).sum(3), rtol=1e-13, atol=1e-13)


def _pack(xs):
    return np.concatenate(xs, axis=0), np.concatenate([[0], np.cumsum([x.shape[0] for x in xs])]).astype(np.int32)


def test_packed_equals_batched_per_sequence():
    rng = np.random.default_rng(5)
    Hq, Hkv, D, Dv = 4, 2, 4, 3
    lens = [(5, 7), (0, 3), (4, 0), (1, 1), (6, 2)]
    qs = [rand(rng, sq, Hq, D) for sq, _ in lens]
    ks = [rand(rng, sk, Hkv, D) for _, sk in lens]
    vs = [rand(rng, sk, Hkv, Dv) for _, sk in lens]
    dos = [rand(rng, sq, Hq, Dv) for sq, _ in lens]
    q, cq = _pack(qs)
    k, ck = _pack(ks)
    v, _ = _pack(vs)
    do, _ = _pack(dos)
    opts = dict(causal=True, window=(3, -1), softcap=2.5, alibi_slopes=rng.uniform(0, 1, Hq))
    out, lse = fo.attention_forward(q, k, v, cu_seqlens_q=cq, cu_seqlens_k=ck, **opts)
    dq, dk, dv = fo.attention_backward(do, q, k, v, cu_seqlens_q=cq, cu_seqlens_k=ck, **opts)
    assert out.shape == (q.shape[0], Hq, Dv) and lse.shape == (Hq, q.shape[0])
    for b, (sq, sk) in enumerate(lens):
        o1, l1 = fo.attention_forward(qs[b][None], ks[b][None], vs[b][None], **opts)
        g1 = fo.attention_backward(dos[b][None], qs[b][None], ks[b][None], vs[b][None], **opts)
        np.testing.assert_array_equal(out[cq[b]:cq[b + 1]], o1[0])
        np.testing.assert_array_equal(lse[:, cq[b]:cq[b + 1]], l1[0])
        np.testing.assert_array_equal(dq[cq[b]:cq[b + 1]], g1[0][0])
        np.testing.assert_array_equal(dk[ck[b]:ck[b + 1]], g1[1][0])
        np.testing.assert_array_equal(dv[ck[b]:ck[b + 1]], g1[2][0])
    assert not np.isnan(out).any() and not np.isnan(lse).any()


def test_packed_equal_lengths_equals_batched_with_dropout_and_batch_alibi():
    """With equal lengths the sequence index b of packed input is the batch index of batched input."""
    rng = np.random.default_rng(6)
    B, Sq, Sk, Hq, Hkv, D = 3, 5, 6, 2, 1, 4
    q, k, v = rand(rng, B, Sq, Hq, D), rand(rng, B, Sk, Hkv, D), rand(rng, B, Sk, Hkv, D)
    do = rand(rng, B, Sq, Hq, D)
    opts = dict(alibi_slopes=rng.uniform(0, 1, (B, Hq)), dropout_p=0.4, seed=77, offset=5, window=(2, 2))
    cq = np.arange(B + 1, dtype=np.int32) * Sq
    ck = np.arange(B + 1, dtype=np.int32) * Sk
    out, lse = fo.attention_forward(q, k, v, **opts)
    pout, plse = fo.attention_forward(q.reshape(B * Sq, Hq, D), k.reshape(B * Sk, Hkv, D), v.reshape(B * Sk, Hkv, D),
                                      cu_seqlens_q=cq, cu_seqlens_k=ck, **opts)
    np.testing.assert_array_equal(pout, out.reshape(B * Sq, Hq, D))
    np.testing.assert_array_equal(plse, lse.transpose(1, 0, 2).reshape(Hq, B * Sq))
    g = fo.attention_backward(do, q, k, v, **opts)
    pg = fo.attention_backward(do.reshape(B * Sq, Hq, D), q.reshape(B * Sq, Hq, D), k.reshape(B * Sk, Hkv, D),
                               v.reshape(B * Sk, Hkv, D), cu_seqlens_q=cq, cu_seqlens_k=ck, **opts)
    for a, b in zip(g, pg):
        np.testing.assert_array_equal(a.reshape(b.shape), b)


def test_dropout_applies_mask_and_scale():
    rng = np.random.default_rng(7)
    B, S, H, D = 1, 9, 1, 4
    q, k, v = rand(rng, B, S, H, D), rand(rng, B, S, H, D), rand(rng, B, S, H, D)
    p = 0.35
    out, lse = fo.attention_forward(q, k, v, dropout_p=p, seed=21, offset=2)
    out0, lse0 = fo.attention_forward(q, k, v)
    np.testing.assert_array_equal(lse, lse0)  # lse is of the logits, before dropout
    s = (q[0, :, 0] @ k[0, :, 0].T) / 2.0
    P = np.exp(s - lse0[0, 0][:, None])
    keep = fo.dropout_keep_mask(21, 2, 0, 0, S, S, p)
    np.testing.assert_allclose(out[0, :, 0], (P * keep * fo.dropout_scale(p)) @ v[0, :, 0], rtol=1e-13)


# --------------------------------------------------------------------------------------------
# Gradients against central finite differences
# --------------------------------------------------------------------------------------------

def _fd_grads(f, xs, eps=1e-6):
    grads = []
    for x in xs:
        g = np.zeros_like(x)
        it = np.nditer(x, flags=["multi_index"])
        for _ in it:
            idx = it.multi_index
            old = x[idx]
            x[idx] = old + eps
            fp = f()
            x[idx] = old - eps
            fm = f()
            x[idx] = old
            g[idx] = (fp - fm) / (2 * eps)
        grads.append(g)
    return grads


GRAD_CASES = [
    dict(),
    dict(causal=True),
    dict(window=(1, 2)),
    dict(softcap=1.2),
    dict(alibi="h"),
    dict(alibi="bh", causal=True),
    dict(dropout_p=0.3, seed=5, offset=3),
    dict(softmax_scale=1.3, softcap=0.8, alibi="h", window=(2, 0), dropout_p=0.25, seed=8),
]


@pytest.mark.parametrize("opts", GRAD_CASES, ids=lambda o: ",".join(sorted(o)) or "plain")
@pytest.mark.parametrize("Sq,Sk", [(4, 4), (3, 5), (5, 2)])
def test_backward_matches_finite_differences(opts, Sq, Sk):
    rng = np.random.default_rng(zlib.crc32(repr((opts, Sq, Sk, "g")).encode()))
    B, Hq, Hkv, D, Dv = 2, 2, 1, 3, 2
    q, k, v = rand(rng, B, Sq, Hq, D), rand(rng, B, Sk, Hkv, D), rand(rng, B, Sk, Hkv, Dv)
    do = rand(rng, B, Sq, Hq, Dv)
    o = _materialise(opts, rng, B, Hq)

    def loss():
        return float(np.sum(fo.attention_forward(q, k, v, **o)[0] * do))

    num = _fd_grads(loss, [q, k, v])
    ana = fo.attention_backward(do, q, k, v, **o)
    for a, n in zip(ana, num):
        np.testing.assert_allclose(a, n, rtol=1e-6, atol=1e-7)


def test_backward_packed_matches_finite_differences():
    rng = np.random.default_rng(8)
    Hq, Hkv, D = 2, 2, 3
    cq = np.array([0, 3, 3, 5], dtype=np.int32)
    ck = np.array([0, 2, 6, 9], dtype=np.int32)
    q, k, v = rand(rng, 5, Hq, D), rand(rng, 9, Hkv, D), rand(rng, 9, Hkv, D)
    do = rand(rng, 5, Hq, D)
    o = dict(cu_seqlens_q=cq, cu_seqlens_k=ck, causal=True, softcap=2.0, alibi_slopes=rng.uniform(0, 1, (3, Hq)),
             dropout_p=0.2, seed=4)

    def loss():
        return float(np.sum(fo.attention_forward(q, k, v, **o)[0] * do))

    num = _fd_grads(loss, [q, k, v])
    ana = fo.attention_backward(do, q, k, v, **o)
    for a, n in zip(ana, num):
        np.testing.assert_allclose(a, n, rtol=1e-6, atol=1e-7)


def test_invalid_arguments_raise():
    rng = np.random.default_rng(9)
    q, k, v = rand(rng, 1, 3, 2, 4), rand(rng, 1, 3, 2, 4), rand(rng, 1, 3, 2, 4)
    with pytest.raises(ValueError):
        fo.attention_forward(q, k, v, dropout_p=1.0)
    with pytest.raises(ValueError):
        fo.attention_forward(q, k, v, window=(-2, 0))
    with pytest.raises(ValueError):
        fo.attention_forward(q, rand(rng, 1, 3, 3, 4), rand(rng, 1, 3, 3, 4))
    with pytest.raises(ValueError):
        fo.attention_forward(q, k, v, softmax_scale=float("nan"))


# --------------------------------------------------------------------------------------------
# NaN reaches only the rows that see it
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("where", ["q", "k", "v"])
def test_forward_nan_matches_brute_force(where):
    rng = np.random.default_rng(10)
    q, k, v = rand(rng, 1, 6, 2, 3), rand(rng, 1, 6, 1, 3), rand(rng, 1, 6, 1, 4)
    {"q": q, "k": k, "v": v}[where][0, 3, 0, 1] = np.nan
    out, lse = fo.attention_forward(q, k, v, causal=True)
    ref_out, ref_lse = brute_forward(q, k, v, causal=True)
    np.testing.assert_allclose(out, ref_out, rtol=1e-12, atol=1e-12, equal_nan=True)
    np.testing.assert_allclose(lse, ref_lse, rtol=1e-12, atol=1e-12, equal_nan=True)
    assert np.isnan(out).any()
    assert not np.isnan(out[0, :3]).any()  # causal rows 0..2 never see key 3 (nor is q row 3 theirs)


def test_backward_nan_stays_in_touched_rows():
    rng = np.random.default_rng(11)
    B, S, H, D = 1, 6, 1, 3
    q, k, v, do = rand(rng, B, S, H, D), rand(rng, B, S, H, D), rand(rng, B, S, H, D), rand(rng, B, S, H, D)
    q[0, 2, 0, 0] = np.nan  # causal: query 2 sees keys 0..2
    dq, dk, dv = fo.attention_backward(do, q, k, v, causal=True)
    assert np.isnan(dq[0, 2]).all() and not np.isnan(np.delete(dq[0], 2, axis=0)).any()
    assert np.isnan(dk[0, :3]).any(axis=-1).all() and not np.isnan(dk[0, 3:]).any()
    assert np.isnan(dv[0, :3]).any(axis=-1).all() and not np.isnan(dv[0, 3:]).any()
    # Same values as the finite problem where row 2 of q is removed from the loss (dout row 2 = 0)
    # for the untouched rows.
    q2, do2 = q.copy(), do.copy()
    q2[0, 2] = 0.0
    do2[0, 2] = 0.0
    g = fo.attention_backward(do2, q2, k, v, causal=True)
    np.testing.assert_allclose(dk[0, 3:], g[1][0, 3:], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.delete(dq[0], 2, axis=0), np.delete(g[0][0], 2, axis=0), rtol=1e-12, atol=1e-12)
