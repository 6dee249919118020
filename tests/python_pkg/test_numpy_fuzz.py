"""Random calls, most of them wrong somewhere (shapes, dtypes, strides, options, packed
lengths, integer ranges): each must either return outputs of the right shapes or raise
ValueError / TypeError / NotImplementedError naming its argument. A crash ends the run.
It found that num_threads = 1,000,000 crashed the process (each thread's scratch)."""

import random

import numpy as np
import pytest

import flashattn

ml_dtypes = pytest.importorskip("ml_dtypes")

EXPECTED = (ValueError, TypeError, NotImplementedError)


def _array(r, shape, dtype):
    rng = np.random.default_rng(r.randrange(1 << 30))
    fill = r.random()
    if fill < 0.8:
        x = rng.standard_normal(shape)
    else:
        x = np.full(shape, r.choice([0.0, 1e4, -np.inf, np.nan]))
    with np.errstate(invalid="ignore"):
        x = x.astype(dtype)
    if x.ndim >= 2 and r.random() < 0.1:
        x = x[..., ::-1]  # last dim not contiguous
    if x.ndim >= 1 and x.shape[0] > 1 and r.random() < 0.1:
        x = x[::2]  # a batch or row stride
    return x


def _options(r, hq, batch):
    kw = {}
    if r.random() < 0.3:
        kw["causal"] = True
    if r.random() < 0.2:
        kw["window"] = r.choice([(-5, 0), (3, 2), (0, -1), (2**40, 2**40), (2**63, 0), (1,), "ab", (1.5, 2)])
    if r.random() < 0.2:
        kw["softcap"] = r.choice([5.0, -1.0, float("nan"), float("inf")])
    if r.random() < 0.2:
        kw["softmax_scale"] = r.choice([0.0, -1.0, 1e30, float("nan"), float("inf")])
    if r.random() < 0.2:
        kw["dropout_p"] = r.choice([0.1, 0.999, 1.0, -0.1, float("nan")])
    if r.random() < 0.15:
        shape = r.choice([(hq,), (batch, hq), (hq + 1,), (batch, hq, 1)])
        kw["alibi_slopes"] = _array(r, shape, r.choice([np.float32, np.float16]))
    if r.random() < 0.1:
        kw["num_threads"] = r.choice([-1, 1, 3, 5000, 1_000_000, 2**31])
    if r.random() < 0.05:
        kw["backend"] = r.choice(["cpu", "reference", "gpu", ""])
    if r.random() < 0.05:
        kw["seed"] = r.choice([-1, 2**70, 1.5])
    return kw


def _call(r):
    dtype = r.choice([np.float32, np.float16, ml_dtypes.bfloat16] * 3 + [np.float64, np.int32, bool])
    batch, sq, sk = r.choice([0, 1, 2]), r.choice([0, 1, 17, 113]), r.choice([0, 1, 17, 129])
    hkv = r.choice([1, 2])
    hq = hkv * r.choice([1, 2]) if r.random() < 0.9 else 3
    d = r.choice([8, 16, 64, 0, 7, 300])
    dv = d if r.random() < 0.8 else r.choice([16, 0])
    kw = _options(r, hq, batch)
    if r.random() < 0.7:
        q = _array(r, (batch, sq, hq, d), dtype)
        k = _array(r, (batch, sk, hkv, d if r.random() < 0.95 else d + 1), dtype)
        v = _array(r, (batch, sk, hkv, dv), dtype if r.random() < 0.95 else np.float32)
        out, lse = flashattn.forward(q, k, v, return_lse=True, **kw)
        assert out.shape == (batch, sq, hq, dv) and lse.shape == (batch, hq, sq)
        if r.random() < 0.5:
            grads = flashattn.backward(np.ones_like(out), q, k, v, out, lse, **kw)
            assert [g.shape for g in grads] == [q.shape, k.shape, v.shape]
        return
    lens_q = [r.choice([0, 1, 7, 50]) for _ in range(max(batch, 1))]
    lens_k = [r.choice([0, 1, 9, 60]) for _ in range(max(batch, 1))]
    cq = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    ck = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    if r.random() < 0.2:
        cq = r.choice([cq[::-1].copy(), cq.astype(np.int64), cq + 5, cq[:1], cq - 3])
    if r.random() < 0.1:
        ck = r.choice([ck[::-1].copy(), ck * 1000, ck[:-1]])
    total_q = int(np.asarray(cq, np.int64)[-1]) if len(cq) else 0
    total_k = int(np.asarray(ck, np.int64)[-1]) if len(ck) else 0
    q = _array(r, (max(total_q, 0) + (3 if r.random() < 0.1 else 0), hq, d), dtype)
    k = _array(r, (max(min(total_k, 4096), 0), hkv, d), dtype)
    v = _array(r, (max(min(total_k, 4096), 0), hkv, dv), dtype)
    max_q = max(lens_q) if r.random() < 0.8 else r.choice([0, -1, 1, 2**64])
    max_k = max(lens_k) if r.random() < 0.8 else r.choice([0, -1, 1])
    out = flashattn.forward_varlen(q, k, v, cq, ck, max_q, max_k, **kw)
    assert out.shape == (q.shape[0], hq, dv)


@pytest.mark.parametrize("seed", range(8))
def test_random_calls_return_or_refuse_by_name(seed):
    r = random.Random(seed)
    for _ in range(200):
        try:
            _call(r)
        except EXPECTED as e:
            assert getattr(e, "argument", None), f"{type(e).__name__} without an argument: {e}"
